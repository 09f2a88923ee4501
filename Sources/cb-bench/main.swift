import ArgumentParser
@main struct CBBench: ParsableCommand { static let configuration = CommandConfiguration(commandName: "cb-bench", abstract: "Benchmarks", subcommands: [AllBench.self, StoreBench.self, RPCBench.self, TimeBench.self, EngineBench.self, RedactBench.self, AgentsBench.self, ContinuityBench.self, ListenBench.self, WSBench.self, PushBench.self, HookBench.self]) }
