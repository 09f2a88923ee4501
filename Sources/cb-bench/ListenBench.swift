import ArgumentParser
import BridgeCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench listen`: the real `codingbridge serve --listen` with many unix
/// socket clients. Ping round trips sampled across all clients, first with
/// everyone well-behaved (the baseline), then with one client that never
/// reads and one that floods requests as fast as it can, in the same run.
struct ListenBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "serve --listen: 1,000 socket clients; ping p50/p99 with a slow reader and a flooding client vs without."
    )

    @Option(help: "Connected, initialized clients.") var clients = 1000
    @Option(help: "Ping round trips sampled per phase (round-robin over the clients).") var pings = 5000
    @Option(help: "Directory holding codingbridge (default: next to cb-bench).") var binDir: String?

    func run() throws {
        signal(SIGPIPE, SIG_IGN) // a closed socket must be an error, not the end of the benchmark
        let server = try BenchBinary.require("codingbridge", binDir: binDir)
        var lim = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim)
        if lim.rlim_cur < lim.rlim_max { lim.rlim_cur = lim.rlim_max; setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim) }
        guard Int(lim.rlim_cur) > clients + 64 else { throw ValidationError("open-file limit \(lim.rlim_cur) is too low for \(clients) clients") }

        var template = Array("/tmp/cb-bench-listen-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        let path = dir + "/s.sock"
        let proc = Process()
        proc.executableURL = URL(fileURLWithPath: server)
        proc.arguments = ["serve", "--ephemeral", "--no-stdio", "--log-level", "error", "--listen", "unix:" + path]
        proc.standardInput = FileHandle.nullDevice
        try proc.run()
        defer {
            proc.terminate()
            proc.waitUntilExit()
            unlink(path + ".lock")
            rmdir(dir)
        }
        var waited = 0
        while (try? SockClient(path)) == nil {
            usleep(20_000)
            waited += 1
            if waited > 500 || !proc.isRunning { throw ValidationError("the server did not start listening on \(path)") }
        }

        print("cb-bench listen: \(clients) socket clients, \(pings) pings sampled round-robin per phase")
        print("  server: \(server) serve --ephemeral --no-stdio --listen unix:\(path)")
        let t0 = now()
        var all: [SockClient] = []
        for i in 0..<clients {
            let c = try SockClient(path)
            c.write("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"deviceId\":\"bench-\(i)\"}}\n")
            all.append(c)
        }
        for c in all { _ = try c.readLine() }
        let connectMs = (now() - t0) / 1e6
        let rss0 = rssKiB(proc.processIdentifier)
        print(String(format: "  connect + initialize %d clients: %.0f ms; server RSS %d KiB (%.1f KiB per client)",
                     clients, connectMs, rss0, Double(rss0) / Double(clients)))
        print("")

        let base = try probe(all)

        // One client that never reads: floods requests until the server stops
        // reading it, then just sits there with its replies unread.
        let slow = try SockClient(path)
        slow.write("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"deviceId\":\"slow\"}}\n")
        slow.nonBlocking()
        let req = Array(String(repeating: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\"}\n", count: 512).utf8)
        var slowSent = 0
        var stuck = 0
        while stuck < 50 {
            let n = req.withUnsafeBytes { Glibc.write(slow.fd, $0.baseAddress, $0.count) }
            if n > 0 { slowSent += n; stuck = 0 } else { stuck += 1; usleep(2000) }
        }
        // One client that floods debug.echo (a Swift handler) as fast as the
        // server answers, reading its replies on another thread.
        let flood = try SockClient(path)
        flood.write("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"deviceId\":\"flood\"}}\n")
        _ = try flood.readLine()
        let stop = Flag()
        let counter = Counter()
        let batch = Array((0..<200).map { "{\"jsonrpc\":\"2.0\",\"id\":\($0 + 1),\"method\":\"debug.echo\",\"params\":{\"n\":\($0)}}\n" }.joined().utf8)
        let writer = Thread {
            while !stop.value { if !flood.writeAll(batch) { break } }
        }
        let reader = Thread {
            var buf = [UInt8](repeating: 0, count: 1 << 16)
            while !stop.value {
                let n = buf.withUnsafeMutableBytes { Glibc.read(flood.fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                counter.add(buf[0..<n].reduce(0) { $0 + ($1 == 10 ? 1 : 0) })
            }
        }
        writer.start()
        reader.start()
        usleep(200_000)
        let floodStart = now(), floodCount0 = counter.value
        let loaded = try probe(all)
        let floodRate = Double(counter.value - floodCount0) / ((now() - floodStart) / 1e9)
        stop.value = true
        let rss1 = rssKiB(proc.processIdentifier)

        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        print(pad("ping round trip over the socket", 52) + "  p50 us   p99 us   max us")
        print(pad("baseline: \(clients) clients, all reading", 52) + String(format: "  %6.1f  %7.1f  %7.1f", base.p50, base.p99, base.max))
        print(pad("+ 1 client never reading, 1 flooding debug.echo", 52) + String(format: "  %6.1f  %7.1f  %7.1f", loaded.p50, loaded.p99, loaded.max))
        print(pad("ratio (loaded / baseline)", 52) + String(format: "  %5.2fx  %6.2fx", loaded.p50 / base.p50, loaded.p99 / base.p99))
        print("")
        print(String(format: "  flooding client: %.0f replies/s while the others were probed", floodRate))
        print(String(format: "  slow client: wrote %d KiB of requests before the server stopped reading it (it reads none of the replies)", slowSent / 1024))
        print(String(format: "  server RSS: %d KiB with %d clients, %d KiB with the slow and flooding clients too (+%d KiB)",
                     rss0, clients, rss1, rss1 - rss0))
        flood.close()
        slow.close()
        writer.cancel()
        reader.cancel()
        for c in all { c.close() }
    }

    struct Latency { var p50, p99, max: Double }

    private func probe(_ all: [SockClient]) throws -> Latency {
        var lat: [Double] = []
        lat.reserveCapacity(pings)
        for i in 0..<pings {
            let c = all[(i * 7919) % all.count] // spread over the clients
            let t = now()
            c.write("{\"jsonrpc\":\"2.0\",\"id\":\(i + 1),\"method\":\"ping\"}\n")
            _ = try c.readLine()
            lat.append((now() - t) / 1e3)
        }
        lat.sort()
        return Latency(p50: lat[lat.count / 2], p99: lat[min(lat.count - 1, lat.count * 99 / 100)], max: lat.last!)
    }

    private func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) }

    private func rssKiB(_ pid: Int32) -> Int {
        guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in s.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}

private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var v = false
    var value: Bool {
        get { lock.lock(); defer { lock.unlock() }; return v }
        set { lock.lock(); v = newValue; lock.unlock() }
    }
}

private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var v = 0
    var value: Int { lock.lock(); defer { lock.unlock() }; return v }
    func add(_ n: Int) { lock.lock(); v += n; lock.unlock() }
}

/// A blocking unix-socket client reading newline-delimited replies.
final class SockClient: @unchecked Sendable {
    let fd: Int32
    private var buf: [UInt8] = []

    init(_ path: String) throws {
        do { fd = try UnixSocket.connect(path) } catch { throw ValidationError("\(error)") }
    }

    func nonBlocking() { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }

    func write(_ s: String) { _ = writeAll(Array(s.utf8)) }

    func writeAll(_ b: [UInt8]) -> Bool {
        var off = 0
        while off < b.count {
            let n = b.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n <= 0 { return false }
            off += n
        }
        return true
    }

    func readLine() throws -> [UInt8] {
        while true {
            if let i = buf.firstIndex(of: 10) {
                let line = Array(buf[..<i])
                buf.removeFirst(i + 1)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { throw ValidationError("the server closed a client connection") }
            buf += chunk[0..<n]
        }
    }

    /// shutdown first: it also wakes a thread blocked writing to this socket.
    func close() {
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
    }
}
