import ArgumentParser
import BridgeRPC

@main
struct CodingBridge: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "codingbridge",
        abstract: "Is the agent working, done, or waiting for you? The CodingBridge Core daemon and tools.",
        subcommands: [Serve.self, RedactCommand.self, DemoCommand.self, HookCommand.self]
    )
}
