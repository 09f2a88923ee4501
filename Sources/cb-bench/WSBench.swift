import ArgumentParser
import BridgeCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench ws`: the real `codingbridge serve --listen ws://` against a bare
/// WebSocket echo on the same library (H2O's own WebSocket API,
/// cb-ws-echo-baseline), both driven by the same client (cb-ws-load) in one
/// run; then 1,000 connected (authenticated, once pairing exists) clients,
/// and Claude Code's http hook against the command hook process.
struct WSBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ws",
        abstract: "WebSocket /rpc ping vs a bare H2O echo; 1,000 clients; http hook vs command hook round trip."
    )

    @Option(help: "Pings in the pipelined run.") var messages = 200_000
    @Option(help: "Pings kept in flight in the pipelined run.") var depth = 64
    @Option(help: "Connected clients in the many-clients run.") var clients = 1000
    @Option(help: "Hook round trips timed (http); the command hook runs a tenth of them.") var hooks = 2000
    @Option(help: "Directory holding codingbridge, cb-ws-load and cb-ws-echo-baseline (default: next to cb-bench).") var binDir: String?

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        raiseFileLimit()
        let load = try BenchBinary.require("cb-ws-load", binDir: binDir)
        let daemon = try BenchDaemon.start(try BenchBinary.require("codingbridge", binDir: binDir))
        defer { daemon.stop() }
        let echo = try BenchEcho.start(try BenchBinary.require("cb-ws-echo-baseline", binDir: binDir))
        defer { echo.stop() }
        let token = try? daemon.pairedToken()

        print("cb-bench ws: daemon ws://127.0.0.1:\(daemon.port)/rpc vs bare H2O echo on port \(echo.port)")
        print("  (the echo answers each frame with one socket write; the daemon batches replies queued meanwhile)")
        func pair(_ title: String, _ args: [String]) throws {
            let b = try LoadFigures.run(load, ["ws", String(echo.port)] + args)
            let d = try LoadFigures.run(load, ["ws", String(daemon.port)] + args)
            print(pad(title) + String(format: " echo %9.0f msg/s p50 %6d us p99 %6d us", b.rate, b.p50, b.p99))
            print(pad("") + String(format: " rpc  %9.0f msg/s p50 %6d us p99 %6d us   %.2fx the echo's rate", d.rate, d.p50, d.p99, d.rate / b.rate))
        }
        try pair("ping pipelined (1 client, \(depth) in flight)", ["--depth", String(depth), "--messages", String(messages)])
        try pair("ping sequential (1 client)", ["--messages", String(messages / 10)])
        var many = ["--clients", String(clients), "--probe", "5000", "--init"]
        if let token { many += ["--token", token] }
        let m = try LoadFigures.run(load, ["ws", String(daemon.port)] + many)
        print(pad("\(clients) \(token == nil ? "" : "authenticated ")clients, 5,000 pings one at a time") + String(format: " p50 %6d us p99 %6d us max %6d us", m.p50, m.p99, m.max))
        try hookRoundTrips(load, daemon)
    }

    private func hookRoundTrips(_ load: String, _ daemon: BenchDaemon) throws {
        guard let token = daemon.hookToken() else { return print("http hook: no hook token in the state directory; skipped") }
        let body = daemon.dir + "/pretooluse.json"
        try #"{"session_id":"bench","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/tmp/x"},"cwd":"/tmp/bench"}"#
            .write(toFile: body, atomically: true, encoding: .utf8)
        let h = try LoadFigures.run(load, ["hook", String(daemon.port), "--token", token, "--body", body, "--requests", String(hooks)])
        let c = daemon.commandHookP50(body: body, runs: max(10, hooks / 10))
        print(pad("http hook PreToolUse (keep-alive)") + String(format: " p50 %6d us p99 %6d us", h.p50, h.p99))
        print(pad("command hook PreToolUse (a process each)") + String(format: " p50 %6.0f us                %.1fx the http hook", c, c / Double(h.p50)))
    }

    private func raiseFileLimit() {
        var lim = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim)
        if lim.rlim_cur < lim.rlim_max { lim.rlim_cur = lim.rlim_max; setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim) }
    }
}

private func pad(_ s: String) -> String { s.count >= 48 ? s : s + String(repeating: " ", count: 48 - s.count) }

/// cb-ws-load's JSON line.
struct LoadFigures: Decodable {
    var rate: Double
    var p50: Int
    var p99: Int
    var max: Int
    enum CodingKeys: String, CodingKey { case rate, p50 = "p50_us", p99 = "p99_us", max = "max_us" }

    static func run(_ exe: String, _ args: [String]) throws -> LoadFigures {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw ValidationError("cb-ws-load \(args.joined(separator: " ")) failed") }
        return try JSONDecoder().decode(LoadFigures.self, from: data)
    }
}

/// The bare echo server, on a port of its choosing.
struct BenchEcho {
    let proc: Process
    let port: Int

    static func start(_ exe: String) throws -> BenchEcho {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw ValidationError("cb-ws-echo-baseline did not start") }
        return BenchEcho(proc: p, port: port)
    }

    func stop() { proc.terminate(); proc.waitUntilExit() }
}
