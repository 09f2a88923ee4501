import ArgumentParser
import BridgeCore
import BridgeRPC
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench rpc`: drives the real `codingbridge serve` through pipes and
/// prints throughput and latency next to a bare jansson NDJSON echo
/// (`cb-echo-baseline`) measured in the same run.
struct RPCBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rpc",
        abstract: "JSON-RPC server over pipes: pipelined req/s and sequential round-trip percentiles vs a bare jansson echo."
    )

    @Option(help: "Requests per pipelined run.") var requests = 200_000
    @Option(help: "Round trips per sequential run.") var sequential = 20_000
    @Option(help: "Directory holding codingbridge and cb-echo-baseline (default: next to cb-bench).")
    var binDir: String?

    func run() throws {
        let server = try BenchBinary.require("codingbridge", binDir: binDir)
        let echo = try BenchBinary.require("cb-echo-baseline", binDir: binDir)
        // The targets are for one core: client and server (spawned from this
        // thread, so they inherit its affinity) share CPU 0. Across the two
        // vCPUs of this VM a wake-up alone costs ~45 us, for the echo too.
        let original = threadAffinity()
        let pinned = ProcessInfo.processInfo.activeProcessorCount >= 2 && pinThread(to: [0])
        defer { if pinned, var mask = original { _ = setThreadAffinity(&mask) } }
        print("cb-bench rpc: \(requests) pipelined requests, \(sequential) sequential round trips per run"
              + (pinned ? "; client and servers pinned to CPU 0 (one core, as the targets are stated)" : ""))
        print("  server:   \(server) serve --ephemeral")
        print("  baseline: \(echo) (jansson parse + build + dump per line, one write per read)")
        print("")

        let ping = { (i: Int) in "{\"jsonrpc\":\"2.0\",\"id\":\(i),\"method\":\"ping\"}\n" }
        let echoReq = { (i: Int) in "{\"jsonrpc\":\"2.0\",\"id\":\(i),\"method\":\"debug.echo\",\"params\":{\"n\":\(i)}}\n" }
        let initialize = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"clientInfo\":{\"name\":\"cb-bench\"}}}\n"

        struct Row { var name: String; var rps: Double; var p50: Double; var p99: Double }
        var rows: [Row] = []
        func measure(_ name: String, _ path: String, _ args: [String], preamble: String?, _ make: @escaping (Int) -> String) throws {
            let pipe = try Child(path, args)
            defer { pipe.finish() }
            if let preamble { _ = try pipe.roundTrip(preamble) }
            let rps = try pipe.pipelined(count: requests, make)
            let lat = try pipe.sequential(count: sequential, make)
            rows.append(Row(name: name, rps: rps, p50: lat.p50, p99: lat.p99))
        }
        try measure("baseline: jansson NDJSON echo", echo, [], preamble: nil, ping)
        try measure("codingbridge ping (answered in C)", server, ["serve", "--ephemeral"], preamble: nil, ping)
        try measure("codingbridge debug.echo (Swift handler)", server, ["serve", "--ephemeral"], preamble: initialize, echoReq)

        let base = rows[0]
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        print(pad("over a pipe", 42) + "  req/s (pipelined)  vs echo   p50 us  p99 us  p50 vs echo")
        for r in rows {
            print(pad(r.name, 42) + "  " + pad(String(format: "%10.0f", r.rps), 18) + "  " +
                  pad(String(format: "%5.2fx", r.rps / base.rps), 8) +
                  String(format: "%7.1f %7.1f   %5.2fx", r.p50, r.p99, r.p50 / base.p50))
        }

        // The same two methods without pipes, through the in-process entry point.
        print("")
        print("in-process (no pipes, InProcessClient):")
        for (name, make, initFirst) in [("ping (C)", ping, false), ("debug.echo (Swift)", echoReq, true)] {
            let loop = EventLoop()
            var options = ServerOptions()
            options.ephemeral = true
            let env = ServerEnvironment(loop: loop, options: options)
            let srv = try RPCServer(env: env)
            let client = srv.makeInProcessClient()
            if initFirst { _ = client.send(initialize) }
            var batch = ""
            for i in 0..<1000 { batch += make(i) }
            var bytes = Array(batch.utf8)
            let rounds = max(1, requests / 1000)
            let t0 = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<rounds {
                client.connection.feed(bytes)
                _ = client.discardOutput()
            }
            let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            bytes.removeAll()
            print("  " + pad(name, 40) + String(format: "%10.0f req/s  (%.2f us/request)", Double(rounds * 1000) / dt, dt * 1e6 / Double(rounds * 1000)))
        }
        print("")
        print("targets: pipelined ping >= 200000 req/s and >= 0.65x echo; sequential p50 <= 20 us")
        let pingRow = rows[1]
        print(String(format: "ping: %.0f req/s (%@), %.2fx echo (%@), p50 %.1f us (%@)",
                     pingRow.rps, pingRow.rps >= 200_000 ? "met" : "NOT met",
                     pingRow.rps / base.rps, pingRow.rps / base.rps >= 0.65 ? "met" : "NOT met",
                     pingRow.p50, pingRow.p50 <= 20 ? "met" : "NOT met"))
    }
}

/// A child process with its stdin/stdout on pipes.
private final class Child {
    let pid: pid_t
    let toChild: Int32
    let fromChild: Int32

    init(_ path: String, _ args: [String]) throws {
        let io = try ChildPipes(path, args)
        pid = io.pid
        toChild = io.toChild
        fromChild = io.fromChild
    }

    func finish() { ChildPipes.finish(pid: pid, toChild: toChild, fromChild: fromChild) }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws {
        var off = 0
        while off < bytes.count {
            let n = write(toChild, bytes.baseAddress! + off, bytes.count - off)
            if n < 0 { if errno == EINTR { continue }; throw ValidationError("write to child failed") }
            off += n
        }
    }

    /// Newlines read beyond what callers asked for (replies are counted, not parsed).
    private var surplus = 0
    private var buf = [UInt8](repeating: 0, count: 1 << 16)

    /// Reads until `lines` more newlines have arrived.
    private func readLines(_ lines: Int) throws {
        if surplus >= lines { surplus -= lines; return }
        let need = lines - surplus
        var seen = 0
        while seen < need {
            let n = buf.withUnsafeMutableBytes { read(fromChild, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; throw ValidationError("read from child failed") }
            if n == 0 { throw ValidationError("child closed its output early") }
            seen += buf.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> Int in
                var c = 0
                var p = UnsafeRawPointer(b.baseAddress!)
                var left = n
                while left > 0 {
                    guard let q = memchr(p, 10, left) else { break }
                    let q2 = UnsafeRawPointer(q)
                    c += 1
                    left -= (q2 - p) + 1
                    p = q2 + 1
                }
                return c
            }
        }
        surplus = seen - need
    }

    func roundTrip(_ text: String) throws -> Double {
        let t0 = DispatchTime.now().uptimeNanoseconds
        var t = text
        try t.withUTF8 { try writeAll(UnsafeRawBufferPointer($0)) }
        try readLines(1)
        return Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000
    }

    func pipelined(count: Int, _ make: (Int) -> String) throws -> Double {
        var all = [UInt8]()
        all.reserveCapacity(count * 64)
        for i in 1...count { all.append(contentsOf: make(i).utf8) }
        let fd = toChild
        let data = all
        let t0 = DispatchTime.now().uptimeNanoseconds
        let writer = Thread {
            data.withUnsafeBytes { b in
                var off = 0
                while off < b.count {
                    let n = write(fd, b.baseAddress! + off, min(65536, b.count - off))
                    if n < 0 { if errno == EINTR { continue }; return }
                    off += n
                }
            }
        }
        writer.start()
        try readLines(count)
        let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        return Double(count) / dt
    }

    func sequential(count: Int, _ make: (Int) -> String) throws -> (p50: Double, p99: Double) {
        var samples = [Double]()
        samples.reserveCapacity(count)
        for i in 0..<min(1000, count) { _ = try roundTrip(make(i)) } // warm up
        for i in 0..<count { samples.append(try roundTrip(make(i))) }
        samples.sort()
        return (samples[samples.count / 2], samples[min(samples.count - 1, samples.count * 99 / 100)])
    }
}
