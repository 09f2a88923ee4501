import ArgumentParser
@main struct CBBench: ParsableCommand { static let configuration = CommandConfiguration(commandName: "cb-bench", abstract: "Benchmarks", subcommands: [RPCBench.self, TimeBench.self, RedactBench.self]) }
