import ArgumentParser

/// `cb-bench all`: every benchmark with its default settings, one after the other.
struct AllBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "all",
        abstract: "Run every benchmark with its defaults (what `make bench` runs)."
    )

    func run() throws {
        var failed: [String] = []
        for command in CBBench.configuration.subcommands where command != AllBench.self {
            let name = command.configuration.commandName ?? "\(command)"
            print("==== cb-bench \(name) ====")
            do {
                var c = try command.parseAsRoot([])
                try c.run()
            } catch {
                print("cb-bench \(name) failed: \(error)")
                failed.append(name)
            }
            print("")
        }
        if !failed.isEmpty { throw ValidationError("failed: \(failed.joined(separator: ", "))") }
    }
}
