import ArgumentParser
import BridgeCore
import CBridge
import CUV
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench push`: the real `codingbridge serve` pushing APNs alerts to a
/// local HTTP/2 server (Tests/pushbench/apns_sink.c: H2O over TLS, answers
/// every POST /3/device/<token> with 200, timestamps arrivals, counts
/// connections and authorization values), against a bare cb_http2 client in
/// this process posting the daemon's own payload and headers to the same
/// server in the same run:
///  1. agent.event approval_request (app in background) -> the request at
///     the server, sequential: from the client (event written -> arrival, one
///     clock: CLOCK_MONOTONIC) and from the daemon's own figure (metrics.get
///     push.apns.latencyMs: effect -> 200); baselines: a bare post ->
///     arrival, and the same event with the app in foreground (no push) ->
///     its reply (target p99 <= 5 ms);
///  2. a burst of task_completed events over many sessions, pipelined:
///     pushes/s to the server on one connection; baselines: the bare client,
///     and the same burst in foreground (no push) (target >= 5,000/s);
///  3. connections the daemon opened, distinct authorization headers seen
///     (one JWT per 30-minute refresh): both should be 1.
/// Needs a C compiler, libh2o-dev and the openssl CLI (all `make bench`
/// needs anyway); without them it says so and skips.
struct PushBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "APNs pushes: event -> request latency, burst pushes/s on one HTTP/2 connection vs a bare client."
    )

    @Option(help: "Sequential approval_request rounds (the daemon keeps its last 1,024 latencies).") var rounds = 1024
    @Option(help: "task_completed events (one push each) in the burst.") var burst = 20_000
    @Option(help: "Sessions the burst is spread over.") var sessions = 1000
    @Option(help: "Requests the bare client keeps in flight (the server allows 100 streams per connection).") var depth = 100
    @Option(help: "Directory holding codingbridge (default: next to cb-bench).") var binDir: String?
    @Option(help: "The APNs stand-in's source (default: Tests/pushbench/apns_sink.c of this checkout).") var sinkSource: String?

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let exe = try BenchBinary.require("codingbridge", binDir: binDir)
        guard let tools = PushBenchTools.find(sinkSource: sinkSource) else { return }
        let work = try PushBenchTools.tempDir()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let sinkExe = try tools.buildSink(into: work)
        let (cert, key, p8) = try tools.makeKeys(in: work)
        let sink = try Sink(sinkExe, cert: cert, key: key)
        defer { sink.stop() }
        let endpoint = "https://127.0.0.1:\(sink.port)"
        let daemon = try PushDaemon.start(exe, dir: work + "/state", endpoint: endpoint, ca: cert, p8: p8)
        defer { daemon.stop() }
        let rpc = try daemon.connectDevice()
        defer { rpc.close() }

        print("cb-bench push: codingbridge serve --apns-endpoint \(endpoint) (apns_sink: H2O, TLS, h2, 100 streams per connection)")
        print("  events over the unix socket; the device's connection takes no notifications (it is away)")

        // Same-run baselines without pushes: the app in foreground, the same
        // events (an approval is a banner, a completion nothing), same commits.
        var fgReplies: [Double] = []
        for i in 0..<max(1, rounds / 4) {
            let t = uv_hrtime()
            rpc.write(approval(i, prefix: "fg"))
            _ = try rpc.readLine()
            fgReplies.append(Double(uv_hrtime() - t) / 1e6)
        }
        let fgStart = uv_hrtime()
        guard rpc.writeAll(completions("f") + Array("{\"jsonrpc\":\"2.0\",\"id\":\"fend\",\"method\":\"ping\"}\n".utf8)) else {
            throw ValidationError("the daemon closed the socket")
        }
        _ = try rpc.readLine()
        let fgRate = Double(burst) / (Double(uv_hrtime() - fgStart) / 1e9)
        // Those approvals end with their tasks (no push is registered yet:
        // going to background would push the ones still pending).
        for k in 0..<32 {
            try PushDaemon.call(rpc, "agent.event", "{\"sessionId\":\"fglat\(k)\",\"type\":\"task_completed\"}")
        }
        try daemon.register(rpc)
        print("  device registered for APNs alerts, app in background")

        // The first push: TLS handshake and the JWT signature included.
        sink.send("watch")
        var t0 = uv_hrtime()
        rpc.write(approval(-1))
        let first = Double(try sink.arrival() - t0) / 1e6
        _ = try rpc.readLine()

        // 1. sequential approvals
        // The reply first (it comes after the turn's commit), then the
        // server's arrival stamp: both exact whichever came first.
        var client: [Double] = [], replies: [Double] = []
        for i in 0..<rounds {
            t0 = uv_hrtime()
            rpc.write(approval(i))
            _ = try rpc.readLine()
            replies.append(Double(uv_hrtime() - t0) / 1e6)
            client.append(Double(try sink.arrival() &- t0) / 1e6)
        }
        sink.send("quiet")
        let m1 = try daemon.pushMetrics(rpc, waitForSent: rounds + 1)

        // 2. the burst
        let events = completions("b")
        sink.send("mark")
        sink.send("wait \(burst)")
        t0 = uv_hrtime()
        guard rpc.writeAll(events) else { throw ValidationError("the daemon closed the socket during the burst") }
        let written = uv_hrtime()
        let w = try sink.window(timeoutMs: 120_000)
        let m2 = try daemon.pushMetrics(rpc, waitForSent: rounds + 1 + burst)
        let answered = uv_hrtime()
        let after = try sink.stats()
        let daemonRate = Double(burst) / (Double(w.last - t0) / 1e9)

        // Baseline: the bare client, the daemon's last request as it was sent.
        let sample = try sink.sample()
        let bare = try BareClient(ca: cert, url: endpoint + sample.path, headers: sample.headers, body: sample.body)
        defer { bare.close() }
        sink.send("watch")
        _ = try bare.once(sink) // its connection first, outside the figures
        var bareLat: [Double] = [], bareReply: [Double] = []
        for _ in 0..<rounds {
            let (arrive, reply) = try bare.once(sink)
            bareLat.append(arrive)
            bareReply.append(reply)
        }
        sink.send("quiet")
        sink.send("mark")
        sink.send("wait \(burst)")
        let b0 = uv_hrtime()
        let bareDone = try bare.burst(burst, depth: depth)
        let bw = try sink.window(timeoutMs: 120_000)
        let bareRate = Double(burst) / (Double(bw.last - b0) / 1e9)
        let end = try sink.stats()

        func pct(_ a: [Double], _ p: Double) -> Double { let s = a.sorted(); return s[min(s.count - 1, Int(Double(s.count) * p))] }
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }
        print(String(format: "  the daemon's request: %d-byte payload, %d headers; first push (TLS + JWT) %.2f ms", sample.body.count,
                     sample.headers.count, first))
        print("")
        print("1. agent.event approval_request -> APNs request, \(rounds) sequential rounds")
        print("   " + pad("", 50) + "p50 ms   p99 ms   max ms   p99 vs bare")
        let bp99 = pct(bareLat, 0.99)
        func row(_ name: String, _ p50: Double, _ p99: Double, _ max: Double) {
            print("   " + pad(name, 50) + String(format: "%6.3f   %6.3f   %6.3f   %6.2fx", p50, p99, max, p99 / bp99))
        }
        row("baseline: bare cb_http2 post -> server received", pct(bareLat, 0.5), bp99, bareLat.max() ?? 0)
        row("baseline: bare cb_http2 post -> 200", pct(bareReply, 0.5), pct(bareReply, 0.99), bareReply.max() ?? 0)
        row("baseline: app in foreground (no push): -> reply", pct(fgReplies, 0.5), pct(fgReplies, 0.99), fgReplies.max() ?? 0)
        row("event written -> its reply (after the commit)", pct(replies, 0.5), pct(replies, 0.99), replies.max() ?? 0)
        row("event written -> server received (one clock)", pct(client, 0.5), pct(client, 0.99), client.max() ?? 0)
        row("effect -> 200 (daemon: metrics.get, last \(m1.count))", m1.p50, m1.p99, m1.max)
        let worst = max(pct(client, 0.99), m1.p99)
        print(String(format: "   target p99 <= 5 ms: %.3f ms (%@)", worst, worst <= 5 ? "met" : "NOT met"))
        print("")
        print("2. burst: \(burst) task_completed events over \(sessions) sessions, pipelined over the unix socket")
        print(String(format: "   %@%9.0f req/s  (server side; %.0f/s to the last 200)", pad("baseline: bare cb_http2, \(depth) in flight", 50),
                     bareRate, Double(burst) / (Double(bareDone - b0) / 1e9)))
        print(String(format: "   %@%9.0f events/s  (the same burst, app in foreground: no push)", pad("baseline: daemon without pushes", 50), fgRate))
        print(String(format: "   %@%9.0f pushes/s  %.2fx the bare client, %.2fx the events/s without pushes",
                     pad("daemon: first event written -> last request received", 50), daemonRate, daemonRate / bareRate, daemonRate / fgRate))
        print(String(format: "   %@ events written in %.0f ms; all %d answered (metrics sent) after %.0f ms; at the server %.0f ms from first to last",
                     pad("", 50), Double(written - t0) / 1e6, burst, Double(answered - t0) / 1e6, Double(w.last - w.first) / 1e6))
        print(String(format: "   target >= 5,000 pushes/s: %.0f (%@)", daemonRate, daemonRate >= 5000 ? "met" : "NOT met"))
        print("")
        let conns = after.connections, auths = after.authorizations
        print("3. the daemon's \(after.requests) requests: \(conns) connection(s) (target 1), \(auths) distinct authorization header(s) (target 1: one JWT);"
              + " sent \(m2.sent), failed \(m2.failed), retried \(m2.retried)")
        print("   (the bare client: \(end.connections - after.connections) connection; requests over HTTP/2: \(end.h2) of \(end.requests); answered 404: \(end.bad))")
    }

    /// The burst: `burst` task_completed notifications (no reply each) over `sessions` sessions.
    private func completions(_ prefix: String) -> [UInt8] {
        var events = [UInt8]()
        events.reserveCapacity(burst * 200)
        for i in 0..<burst {
            events += Array(("{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":{\"sessionId\":\"\(prefix)\(i % sessions)\","
                + "\"type\":\"task_completed\",\"summary\":\"All 42 tests pass\",\"projectName\":\"Proj\(i % sessions)\","
                + "\"projectPath\":\"~/code/Proj\(i % sessions)\"}}\n").utf8)
        }
        return events
    }

    private func approval(_ i: Int, prefix: String = "") -> String {
        "{\"jsonrpc\":\"2.0\",\"id\":\"a\(i)\",\"method\":\"agent.event\",\"params\":{\"sessionId\":\"\(prefix)lat\(i & 31)\",\"type\":\"approval_request\","
            + "\"requestId\":\"\(prefix)r\(i)\",\"toolName\":\"Bash\",\"input\":{\"command\":\"npm test\"},\"timeoutSeconds\":3600,"
            + "\"projectName\":\"MyApp\",\"projectPath\":\"~/code/MyApp\"}}\n"
    }
}

/// The C compiler, openssl and the sink's source; nil (and a message) when one is missing.
struct PushBenchTools {
    let cc: String
    let openssl: String
    let source: String
    let flags: [String]

    static func which(_ name: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let p = "\(dir)/\(name)"
            if access(p, X_OK) == 0 { return p }
        }
        return nil
    }

    static func find(sinkSource: String?) -> PushBenchTools? {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [sinkSource, here.path + "/Tests/pushbench/apns_sink.c",
                          FileManager.default.currentDirectoryPath + "/Tests/pushbench/apns_sink.c"].compactMap { $0 }
        guard let source = candidates.first(where: { access($0, R_OK) == 0 }) else {
            print("cb-bench push: skipped: Tests/pushbench/apns_sink.c not found (run from the checkout or pass --sink-source)")
            return nil
        }
        guard let cc = which("cc") ?? which("clang") ?? which("gcc") else {
            print("cb-bench push: skipped: no C compiler (cc) to build the APNs stand-in")
            return nil
        }
        guard let openssl = which("openssl") else {
            print("cb-bench push: skipped: the openssl command is missing (apt-get install openssl)")
            return nil
        }
        guard access("/usr/include/h2o.h", R_OK) == 0 || (try? Self.output(which("pkg-config") ?? "pkg-config", ["--exists", "libh2o"])) != nil else {
            print("cb-bench push: skipped: libh2o-dev is missing (scripts/deps.sh installs it)")
            return nil
        }
        let pc = (try? Self.output(which("pkg-config") ?? "pkg-config", ["--cflags", "--libs", "libh2o", "libuv"]))
            .map { $0.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init) } ?? ["-lh2o", "-luv"]
        return PushBenchTools(cc: cc, openssl: openssl, source: source, flags: pc + ["-lssl", "-lcrypto"])
    }

    static func tempDir() throws -> String {
        var template = Array("/tmp/cb-bench-push-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw ValidationError("mkdtemp failed") }
        return String(cString: p)
    }

    /// Runs `exe`; its stdout, or an error with its stderr.
    @discardableResult
    static func output(_ exe: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw ValidationError("\(exe) \(args.joined(separator: " ")): \(String(decoding: e, as: UTF8.self))")
        }
        return String(decoding: o, as: UTF8.self)
    }

    func buildSink(into dir: String) throws -> String {
        let exe = dir + "/apns_sink"
        try Self.output(cc, ["-O2", "-o", exe, source] + flags)
        return exe
    }

    /// The server's self-signed certificate (also the CA the daemon trusts)
    /// and the APNs auth key (.p8: a P-256 key in PKCS#8).
    func makeKeys(in dir: String) throws -> (cert: String, key: String, p8: String) {
        let cert = dir + "/sink-cert.pem", key = dir + "/sink-key.pem", p8 = dir + "/AuthKey_BENCH12345.p8"
        try Self.output(openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                  "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                                  "-addext", "subjectAltName=IP:127.0.0.1"])
        try Self.output(openssl, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p8])
        return (cert, key, p8)
    }
}

/// The APNs stand-in, driven line by line over its stdin and stdout.
final class Sink {
    private let child: ChildPipes
    let port: Int
    private var buf: [UInt8] = []

    struct Stats { var requests: Int; var connections: Int; var authorizations: Int; var h2: Int; var bad: Int }

    init(_ exe: String, cert: String, key: String) throws {
        child = try ChildPipes(exe, [cert, key])
        guard let p = Int(try Self.line(child.fromChild, &buf, timeoutMs: 10_000)) else {
            throw ValidationError("apns_sink did not start")
        }
        port = p
    }

    func send(_ command: String) {
        let b = Array((command + "\n").utf8)
        _ = b.withUnsafeBytes { write(child.toChild, $0.baseAddress, $0.count) }
    }

    /// The next "R <ns>" line: when a request arrived.
    func arrival(timeoutMs: Int32 = 30_000) throws -> UInt64 {
        let l = try Self.line(child.fromChild, &buf, timeoutMs: timeoutMs)
        guard l.hasPrefix("R "), let ns = UInt64(l.dropFirst(2)) else { throw ValidationError("apns_sink said '\(l)'") }
        return ns
    }

    func window(timeoutMs: Int32) throws -> (count: Int, first: UInt64, last: UInt64) {
        let f = try Self.line(child.fromChild, &buf, timeoutMs: timeoutMs).split(separator: " ")
        guard f.count == 4, f[0] == "W", let n = Int(f[1]), let a = UInt64(f[2]), let b = UInt64(f[3]) else {
            throw ValidationError("apns_sink: unexpected window line")
        }
        return (n, a, b)
    }

    func stats() throws -> Stats {
        send("stats")
        let f = try Self.line(child.fromChild, &buf, timeoutMs: 10_000).split(separator: " ").compactMap { Int($0) }
        guard f.count == 5 else { throw ValidationError("apns_sink: unexpected stats line") }
        return Stats(requests: f[0], connections: f[1], authorizations: f[2], h2: f[3], bad: f[4])
    }

    /// The last request's APNs headers and body (the path is rebuilt from the token).
    func sample() throws -> (path: String, headers: [String], body: [UInt8]) {
        send("sample")
        let h = try Self.line(child.fromChild, &buf, timeoutMs: 10_000)
        guard h.hasPrefix("H "), let n = Int(h.dropFirst(2)) else { throw ValidationError("apns_sink: unexpected sample") }
        var headers: [String] = []
        for _ in 0..<n {
            let l = try Self.line(child.fromChild, &buf, timeoutMs: 10_000)
            let name = l.prefix { $0 != ":" }
            if name == "authorization" || name == "content-type" || name.hasPrefix("apns-") { headers.append(l) }
        }
        let b = try Self.line(child.fromChild, &buf, timeoutMs: 10_000)
        guard b.hasPrefix("B ") else { throw ValidationError("apns_sink: unexpected sample body") }
        let hex = Array(b.utf8.dropFirst(2))
        var body: [UInt8] = []
        var i = 0
        while i + 1 < hex.count {
            body.append(UInt8(String(decoding: hex[i...i + 1], as: UTF8.self), radix: 16) ?? 0)
            i += 2
        }
        return ("/3/device/" + PushDaemon.deviceToken, headers, body)
    }

    static func line(_ fd: Int32, _ buf: inout [UInt8], timeoutMs: Int32) throws -> String {
        let deadline = uv_hrtime() + UInt64(timeoutMs) * 1_000_000
        while true {
            if let i = buf.firstIndex(of: 10) {
                let l = String(decoding: buf[..<i], as: UTF8.self)
                buf.removeFirst(i + 1)
                return l
            }
            let now = uv_hrtime()
            guard now < deadline else { throw ValidationError("apns_sink: nothing within \(timeoutMs) ms (no push arrived?)") }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, Int32((deadline - now) / 1_000_000) + 1) <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { throw ValidationError("apns_sink exited") }
            buf += chunk[0..<n]
        }
    }

    func stop() { ChildPipes.finish(pid: child.pid, toChild: child.toChild, fromChild: child.fromChild) }
}

/// `codingbridge serve` with APNs pointed at the sink, on a unix socket.
final class PushDaemon {
    static let deviceToken = String(repeating: "ab", count: 32)
    let dir: String
    let proc = Process()

    private init(dir: String) { self.dir = dir }

    static func start(_ exe: String, dir: String, endpoint: String, ca: String, p8: String) throws -> PushDaemon {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let d = PushDaemon(dir: dir)
        d.proc.executableURL = URL(fileURLWithPath: exe)
        d.proc.arguments = ["serve", "--state-dir", dir, "--no-stdio", "--log-level", "error", "--listen", "unix",
                            "--apns-key", p8, "--apns-key-id", "BENCH12345", "--apns-team-id", "TEAM123456",
                            "--apns-topic", "dev.codingbridge.bench", "--apns-endpoint", endpoint, "--apns-ca", ca]
        d.proc.standardInput = FileHandle.nullDevice
        try d.proc.run()
        return d
    }

    /// The device's connection: initialized with a deviceId and no
    /// notifications (so it counts as away).
    func connectDevice() throws -> SockClient {
        let path = dir + "/codingbridge.sock"
        var c: SockClient?
        for _ in 0..<500 {
            if let s = try? SockClient(path) { c = s; break }
            guard proc.isRunning else { break }
            usleep(20_000)
        }
        guard let c else { throw ValidationError("codingbridge serve did not listen on \(path)") }
        try Self.call(c, "initialize", "{\"clientInfo\":{\"name\":\"cb-bench\"},\"deviceId\":\"bench-phone\",\"capabilities\":{\"notifications\":false}}")
        return c
    }

    /// The device's APNs alert token, then its app to background.
    func register(_ c: SockClient) throws {
        let reg = try Self.call(c, "push.register", "{\"platform\":\"apns\",\"kind\":\"alert\",\"token\":\"\(Self.deviceToken)\",\"environment\":\"production\"}")
        guard reg["enabled"] as? Bool == true else { throw ValidationError("push.register: APNs not enabled: \(reg)") }
        try Self.call(c, "app.update", "{\"phase\":\"background\"}")
    }

    /// One call and its result (the connection takes no notifications: the next line is the reply).
    @discardableResult
    static func call(_ c: SockClient, _ method: String, _ params: String) throws -> [String: Any] {
        c.write("{\"jsonrpc\":\"2.0\",\"id\":\"\(method)\",\"method\":\"\(method)\",\"params\":\(params)}\n")
        let reply = try JSONSerialization.jsonObject(with: Data(try c.readLine())) as? [String: Any]
        guard let r = reply?["result"] as? [String: Any] else { throw ValidationError("\(method): \(reply ?? [:])") }
        return r
    }

    struct Metrics { var sent = 0, failed = 0, retried = 0, count = 0; var p50 = 0.0, p99 = 0.0, max = 0.0 }

    /// metrics.get's push.apns once `sent + failed` reaches `waitForSent` (or after 30 s).
    func pushMetrics(_ c: SockClient, waitForSent: Int) throws -> Metrics {
        let deadline = uv_hrtime() + 30_000_000_000
        while true {
            c.write("{\"jsonrpc\":\"2.0\",\"id\":\"m\",\"method\":\"metrics.get\"}\n")
            let reply = try JSONSerialization.jsonObject(with: Data(try c.readLine())) as? [String: Any]
            let a = ((reply?["result"] as? [String: Any])?["push"] as? [String: Any])?["apns"] as? [String: Any] ?? [:]
            let l = a["latencyMs"] as? [String: Any] ?? [:]
            let m = Metrics(sent: a["sent"] as? Int ?? 0, failed: a["failed"] as? Int ?? 0, retried: a["retried"] as? Int ?? 0,
                            count: l["count"] as? Int ?? 0, p50: l["p50"] as? Double ?? 0, p99: l["p99"] as? Double ?? 0,
                            max: l["max"] as? Double ?? 0)
            if m.sent + m.failed >= waitForSent || uv_hrtime() > deadline { return m }
            usleep(2000)
        }
    }

    func stop() {
        if proc.isRunning { proc.terminate(); proc.waitUntilExit() }
    }
}

/// cb_http2 alone on a loop of its own: the baseline.
final class BareClient {
    private let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
    private var client: OpaquePointer?
    private let url: String
    private let headers: [UnsafeMutablePointer<CChar>?]
    private let body: [UInt8]
    private var posted = 0, done = 0, ok = 0, total = 0, depth = 0
    private var lastDone: UInt64 = 0
    private var lastStatus = 0

    init(ca: String, url: String, headers: [String], body: [UInt8]) throws {
        self.url = url
        self.headers = headers.map { strdup($0) }
        self.body = body
        uv_loop_init(loop)
        var c: OpaquePointer?
        guard cb_http2_new(loop, &c) == 0, let c, cb_http2_set_ca_file(c, ca) == 0 else {
            throw ValidationError("cb_http2_new failed")
        }
        client = c
    }

    private func post() throws {
        let me = Unmanaged.passUnretained(self).toOpaque()
        let rc: Int32 = headers.map { UnsafePointer<CChar>($0) }.withUnsafeBufferPointer { h in
            body.withUnsafeBytes { b in
                cb_http2_post(client, url, h.baseAddress, Int32(h.count), b.baseAddress, b.count, 30_000, { r, data in
                    guard let r, let data else { return }
                    let me = Unmanaged<BareClient>.fromOpaque(data).takeUnretainedValue()
                    me.done += 1
                    me.lastStatus = Int(r.pointee.status)
                    if r.pointee.status == 200 { me.ok += 1 }
                    me.lastDone = uv_hrtime()
                    if me.posted < me.total { try? me.post() }
                }, me)
            }
        }
        guard rc == 0 else { throw ValidationError("cb_http2_post: \(rc)") }
        posted += 1
    }

    private func runUntilDone() {
        while done < total { uv_run(loop, UV_RUN_ONCE) }
    }

    /// One request: ms to its arrival at the sink (watching) and to its 200.
    func once(_ sink: Sink) throws -> (Double, Double) {
        posted = 0; done = 0; ok = 0; total = 1
        let t0 = uv_hrtime()
        try post()
        runUntilDone()
        guard ok == 1 else { throw ValidationError("bare client: status \(lastStatus)") }
        let arrived = try sink.arrival()
        return (Double(arrived &- t0) / 1e6, Double(lastDone - t0) / 1e6)
    }

    /// n requests, `depth` in flight; when the last 200 came.
    func burst(_ n: Int, depth: Int) throws -> UInt64 {
        posted = 0; done = 0; ok = 0; total = n
        for _ in 0..<min(depth, n) { try post() }
        runUntilDone()
        guard ok == n else { throw ValidationError("bare client: \(n - ok) of \(n) not answered 200 (last status \(lastStatus))") }
        return lastDone
    }

    func close() {
        guard let c = client else { return }
        client = nil
        cb_http2_close(c, nil, nil)
        while uv_run(loop, UV_RUN_DEFAULT) != 0 {}
        uv_loop_close(loop)
        loop.deallocate()
        headers.forEach { free($0) }
    }
}
