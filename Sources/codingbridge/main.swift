import ArgumentParser
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

@main
struct CodingBridge: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "codingbridge",
        abstract: "Is the agent working, done, or waiting for you? The CodingBridge Core daemon and tools.",
        subcommands: [Serve.self, RedactCommand.self, DemoCommand.self, HookCommand.self, DevicesCommand.self]
    )

    /// As ArgumentParser's, except that `devices` reports a usage error with
    /// exit code 2 (its documented contract) instead of 64.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure, CommandLine.arguments.dropFirst().first == "devices" {
                HookIO.stderr(fullMessage(for: error))
                Glibc.exit(2)
            }
            exit(withError: error)
        }
    }
}
