import ArgumentParser
import BridgeCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench continuity`: what durability costs and how fast a restart recovers.
///  1. sustained agent.event mix, pipelined, with a state directory (each
///     session touched in a loop turn rewritten once, one commit per turn) vs
///     the same run with `--ephemeral` (no snapshot), same binary, same run;
///  2. restart: time from spawn to the `initialize` reply with N sessions (each
///     with a pending approval) in the state directory, vs an empty state
///     directory (process start + store open).
struct ContinuityBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "continuity",
        abstract: "Snapshot cost (events/s with --state-dir vs --ephemeral) and recovery time vs an empty start.")

    @Option(help: "Pipelined agent events per run.") var events = 100_000
    @Option(help: "Sessions in the state directory for the restart figure.") var sessions = 5_000
    @Option(help: "Directory holding codingbridge (default: next to cb-bench).") var binDir: String?

    func run() throws {
        let server = try BenchBinary.require("codingbridge", binDir: binDir)
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("cb-bench-continuity-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        print("cb-bench continuity: \(server)")
        print("")

        // 1. throughput
        var payload = [UInt8]()
        payload.reserveCapacity(events * 170)
        let tools = ["\"toolName\":\"Read\",\"input\":{\"file_path\":\"Sources/App/Main.swift\"}",
                     "\"toolName\":\"Bash\",\"input\":{\"command\":\"npm test\"}",
                     "\"toolName\":\"Edit\",\"input\":{\"file_path\":\"Sources/App/Login.swift\"}"]
        for i in 0..<events {
            let body = i < 100 ? "\"type\":\"task_started\",\"projectName\":\"Proj\(i)\"" : "\"type\":\"tool_use\",\(tools[i % 3])"
            payload += Array("{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":{\"sessionId\":\"s\(i % 100)\",\(body)}}\n".utf8)
        }
        payload += Array("{\"jsonrpc\":\"2.0\",\"id\":\"end\",\"method\":\"ping\"}\n".utf8)
        var rates: [(String, Double)] = []
        for (name, args) in [("baseline: --ephemeral (no snapshot)", ["--ephemeral"]),
                             ("--state-dir (dirty sessions written per loop turn)", ["--state-dir", tmp + "/tp"])] {
            let c = try Child(server, ["serve", "--manual-clock"] + args)
            try c.roundTrip("{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{}}\n", until: "\"id\":\"init\"")
            let t0 = DispatchTime.now().uptimeNanoseconds
            try c.roundTrip(payload, until: "\"id\":\"end\"")
            rates.append((name, Double(events) / (Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)))
            c.finish()
        }
        print("1. sustained agent events (\(events) pipelined notifications over stdio, 100 sessions)")
        for (name, r) in rates {
            print("   " + name.padding(toLength: 50, withPad: " ", startingAt: 0)
                  + String(format: "%10.0f events/s   %5.2fx baseline", r, r / rates[0].1))
        }
        print("")

        // 2. restart
        let full = tmp + "/full", empty = tmp + "/empty"
        do {
            let c = try Child(server, ["serve", "--manual-clock", "--state-dir", full])
            var fill = Array("{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{}}\n".utf8)
            for i in 0..<sessions {
                fill += Array(("{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":{\"sessionId\":\"s\(i)\",\"type\":\"task_started\",\"projectName\":\"Proj\(i)\"}}\n"
                    + "{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":{\"sessionId\":\"s\(i)\",\"type\":\"approval_request\",\"requestId\":\"r\(i)\",\"timeoutSeconds\":3600,\"toolName\":\"Bash\",\"input\":{\"command\":\"npm test\"}}}\n").utf8)
            }
            fill += Array("{\"jsonrpc\":\"2.0\",\"id\":\"end\",\"method\":\"ping\"}\n".utf8)
            try c.roundTrip(fill, until: "\"id\":\"end\"")
            c.finish()
        }
        func startup(_ dir: String) throws -> (Double, String) {
            var best = Double.infinity
            var line = ""
            for _ in 0..<3 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                let c = try Child(server, ["serve", "--manual-clock", "--state-dir", dir])
                line = try c.roundTrip("{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{}}\n", until: "\"id\":\"init\"")
                best = min(best, Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
                c.finish()
            }
            return (best, line)
        }
        let (base, _) = try startup(empty)
        let (rec, line) = try startup(full)
        let sessionsBack = line.range(of: "\"sessions\":").map { line[$0.upperBound...].prefix { $0.isNumber } } ?? "?"
        print("2. restart to initialize reply (best of 3)")
        print("   " + "baseline: empty state directory".padding(toLength: 50, withPad: " ", startingAt: 0) + String(format: "%8.1f ms", base))
        print("   " + "\(sessions) sessions + pending approvals".padding(toLength: 50, withPad: " ", startingAt: 0)
              + String(format: "%8.1f ms   %5.2fx baseline", rec, rec / base) + "   (recovered sessions: \(sessionsBack))")
        print(String(format: "   recovery cost per session: %.1f us", (rec - base) * 1000 / Double(sessions)))
    }
}

/// A server child on pipes: write bytes (from a thread, so a full pipe cannot
/// deadlock against unread output), read lines until one contains a marker.
private final class Child {
    let proc = Process()
    let input = Pipe(), output = Pipe()
    private var buffer = [UInt8]()

    init(_ path: String, _ args: [String]) throws {
        proc.executableURL = URL(fileURLWithPath: path)
        proc.arguments = args
        proc.standardInput = input
        proc.standardOutput = output
        proc.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try proc.run()
    }

    /// Sends `bytes` and returns the first output line containing `marker`.
    @discardableResult
    func roundTrip(_ bytes: [UInt8], until marker: String) throws -> String {
        let fh = input.fileHandleForWriting
        let writer = Thread { fh.write(Data(bytes)) }
        writer.start()
        let m = Array(marker.utf8)
        let fd = output.fileHandleForReading.fileDescriptor
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            while let nl = buffer.firstIndex(of: 10) {
                let line = Array(buffer[..<nl])
                buffer.removeSubrange(...nl)
                if line.count >= m.count, (0...(line.count - m.count)).contains(where: { line[$0..<($0 + m.count)].elementsEqual(m) }) {
                    return String(decoding: line, as: UTF8.self)
                }
            }
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { throw ValidationError("server closed its output before \(marker)") }
            buffer += chunk[0..<n]
        }
    }

    @discardableResult
    func roundTrip(_ text: String, until marker: String) throws -> String { try roundTrip(Array(text.utf8), until: marker) }

    func finish() {
        try? input.fileHandleForWriting.close()
        proc.waitUntilExit()
    }
}
