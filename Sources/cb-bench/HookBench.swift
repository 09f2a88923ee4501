import ArgumentParser
import BridgeCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench hook`: what one Claude Code tool call costs through each kind of
/// hook, against the real `codingbridge serve` (issue #17's targets).
///  1. Command hook: `codingbridge hook` spawned per event (posix_spawn ->
///     exit, the input on stdin) vs the same binary started with empty stdin
///     (it parses its arguments, reads EOF, exits: the least it does, as it
///     has no --version), with /bin/true and `ld.so --list` (the libraries
///     mapped, nothing relocated or run) to show where the start goes, and the
///     hook's own socket exchange from this process (no new process). Rows
///     run interleaved, one run of each in turn, so load drift hits all alike.
///  2. http hook: POST /hooks/claude on one kept-alive connection vs the same
///     request to a path the listener answers itself (404 from H2O's router,
///     no daemon turn), alternating on the same connection.
///  3. PermissionRequest answered at once by a connected local client, both ways.
struct HookBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hook",
        abstract: "Command hook overhead vs starting the binary (target 10 ms); http hook vs the bare listener (target 1 ms).")

    @Option(help: "Runs per command-hook row.") var runs = 200
    @Option(help: "Requests per http row.") var requests = 2000
    @Option(help: "Round trips per PermissionRequest row.") var decisions = 100
    @Option(help: "Directory holding codingbridge (default: next to cb-bench).") var binDir: String?

    static let preToolUse = #"{"session_id":"bench-hook","transcript_path":"/home/dev/.claude/projects/app/bench-hook.jsonl","cwd":"/home/dev/app","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"npm test -- --runInBand","description":"Run the test suite"},"tool_use_id":"toolu_01bench"}"#
    static let permissionRequest = #"{"session_id":"bench-perm","transcript_path":"/home/dev/.claude/projects/app/bench-perm.jsonl","cwd":"/home/dev/app","permission_mode":"default","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf dist","description":"Clean the build"}}"#

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        setvbuf(stdout, nil, _IOLBF, 0) // lines as they come when piped (a run takes a while)
        let bin = try BenchBinary.require("codingbridge", binDir: binDir)
        let daemon = try BenchDaemon.start(bin)
        defer { daemon.stop() }
        let pre = daemon.dir + "/pretooluse.json", perm = daemon.dir + "/permission.json"
        try Self.preToolUse.write(toFile: pre, atomically: true, encoding: .utf8)
        try Self.permissionRequest.write(toFile: perm, atomically: true, encoding: .utf8)
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        print("cb-bench hook: codingbridge serve --state-dir \(daemon.dir) (unix socket; http hooks on 127.0.0.1:\(daemon.port)); load average \(load)")
        print("  input: PreToolUse Bash `npm test -- --runInBand` (\(Self.preToolUse.utf8.count) bytes), as Claude Code sends it")
        print("")
        let start = try commandHook(bin, daemon, input: pre)
        print("")
        try httpHook(daemon, input: pre)
        print("")
        try permissionRequests(bin, daemon, input: perm, start: start)
    }

    // MARK: 1. command hook

    /// The interleaved process rows; returns the start baseline's p50 (ms).
    func commandHook(_ bin: String, _ daemon: BenchDaemon, input: String) throws -> Double {
        let state = ["--state-dir", daemon.dir]
        let out = daemon.dir + "/hook.out", err = daemon.dir + "/hook.err"
        var bad: [String] = []
        let sock = daemon.dir + "/codingbridge.sock"
        let rpcLines = Array(("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"clientInfo\":{\"name\":\"cb-bench\"},\"capabilities\":{\"notifications\":false}}}\n"
            + "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"agent.hook\",\"params\":\(Self.preToolUse)}\n").utf8)
        var rows: [(String, () throws -> Double)] = [
            ("/bin/true (fork + exec floor)", { try spawnTimed("/bin/true", [], stdin: "/dev/null", out: out, err: err).ms }),
        ]
        let ldso = "/lib64/ld-linux-x86-64.so.2"
        if access(ldso, X_OK) == 0 {
            rows.append(("ld.so --list: \(libraryCount(ldso, bin, out, err)) libraries mapped, none run",
                         { try spawnTimed(ldso, ["--list", bin], stdin: "/dev/null", out: out, err: err).ms }))
        }
        rows.append(("codingbridge hook, empty stdin (binary start)", {
            let r = try spawnTimed(bin, ["hook", "--verbose"] + state, stdin: "/dev/null", out: out, err: err)
            if r.status != 0 || !r.err.contains("stdin is not a JSON object") { bad.append("start: \(r.status) \(r.err)") }
            return r.ms
        }))
        rows.append(("codingbridge hook PreToolUse -> daemon", {
            let r = try spawnTimed(bin, ["hook", "--verbose"] + state, stdin: input, out: out, err: err)
            if r.status != 0 || !r.out.isEmpty || !r.err.contains("PreToolUse: applied") { bad.append("hook: \(r.status) \(r.out) \(r.err)") }
            return r.ms
        }))
        rows.append(("  its socket exchange from this process", { try socketExchange(sock, rpcLines) }))
        print("command hook: posix_spawn -> exit (stdin from a file, stdout/stderr to files), \(runs) runs per row, rows interleaved")
        let t = try interleaved(rows.map { $0.1 }, runs: runs)
        for (i, row) in rows.enumerated() { print(line(row.0, t[i])) }
        let n = rows.count
        let base = percentile(t[n - 3], 0.5), hook = percentile(t[n - 2], 0.5)
        let overhead = hook - base
        print(pad("=> overhead: hook p50 - start p50") + String(format: "%+8.2f ms  (%.2fx the start)   target <= 10 ms: %@",
                                                            overhead, hook / base, overhead <= 10 ? "met" : "NOT met"))
        print(pad("   whole command hook per tool call") + String(format: " p50 %7.2f ms  (%.0fx /bin/true)", hook, hook / percentile(t[0], 0.5)))
        print("  checked: \(2 * (runs + 3) - bad.count)/\(2 * (runs + 3)) codingbridge runs as expected (start: exit 0, nothing to do; hook: exit 0, printed nothing, the daemon said applied)")
        if let first = bad.first { print("  UNEXPECTED (\(bad.count)): \(first)") }
        return base
    }

    /// One `initialize` + `agent.hook` over a fresh connection, as the hook
    /// sends them: the daemon's part of the command hook, in ms.
    func socketExchange(_ path: String, _ lines: [UInt8]) throws -> Double {
        let t0 = DispatchTime.now().uptimeNanoseconds
        let c = try SockClient(path)
        defer { c.close() }
        _ = c.writeAll(lines)
        while true {
            let l = try c.readLine()
            if let o = try? JSONSerialization.jsonObject(with: Data(l)) as? [String: Any], o["id"] as? Int == 2 {
                guard o["result"] != nil else { throw ValidationError("agent.hook failed: \(String(decoding: l, as: UTF8.self))") }
                break
            }
        }
        return Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6
    }

    func libraryCount(_ ldso: String, _ bin: String, _ out: String, _ err: String) -> Int {
        let r = try? spawnTimed(ldso, ["--list", bin], stdin: "/dev/null", out: out, err: err)
        return r?.out.split(separator: "\n").filter { $0.contains("=>") }.count ?? 0
    }
}

// MARK: - 2. http hook, 3. PermissionRequest

extension HookBench {
    func httpHook(_ daemon: BenchDaemon, input: String) throws {
        guard let token = daemon.hookToken() else { return print("http hook: no hook token in the state directory; skipped") }
        let body = try String(contentsOfFile: input, encoding: .utf8)
        let conn = try HTTPConn(port: daemon.port)
        defer { conn.close() }
        var t: [[Double]] = [[], []]
        var bad: [String] = []
        // Alternating on one connection: the same bytes but the path.
        for i in 0..<(2 * requests + 20) {
            let hook = i % 2 == 1
            let r = try conn.post(hook ? "/hooks/claude" : "/cb-bench-no-such-path", token: token, body: body)
            if hook ? (r.status != 200 || !r.body.isEmpty) : r.status != 404 { bad.append("\(r.status) \(r.body)") }
            if i >= 20 { t[hook ? 1 : 0].append(r.ms) }
        }
        print("http hook: POST on one kept-alive connection (Authorization: Bearer <state dir>/hook-token), \(requests) each, alternating")
        print(line("POST /cb-bench-no-such-path (404 from the listener)", t[0], unit: .us))
        print(line("POST /hooks/claude PreToolUse (200 after the commit)", t[1], unit: .us))
        let b = percentile(t[0], 0.5), h = percentile(t[1], 0.5)
        print(pad("=> http hook per tool call") + String(format: " p50 %7.0f us (%+.0f us over the bare listener, %.1fx)   target <= 1 ms: %@",
                                                        h * 1000, (h - b) * 1000, h / b, h <= 1 ? "met" : "NOT met"))
        print("  checked: \(2 * requests + 20 - bad.count)/\(2 * requests + 20) answers had the expected status (hooks: 200 with an empty body)")
        if let first = bad.first { print("  UNEXPECTED (\(bad.count)): \(first)") }
    }

    /// PermissionRequest with a local client that allows each approval as
    /// soon as it is told: the hook's wait adds the daemon's notify -> respond
    /// turn, both as a process and over http.
    func permissionRequests(_ bin: String, _ daemon: BenchDaemon, input: String, start: Double) throws {
        let answerer = try Answerer(path: daemon.dir + "/codingbridge.sock")
        defer { answerer.stop() }
        let out = daemon.dir + "/perm.out", err = daemon.dir + "/perm.err"
        var bad: [String] = []
        var cmd: [Double] = []
        for _ in 0..<decisions {
            // a short --timeout: should the answerer miss one, the row stops instead of waiting a minute per run
            let r = try spawnTimed(bin, ["hook", "--state-dir", daemon.dir, "--timeout", "5"], stdin: input, out: out, err: err)
            cmd.append(r.ms)
            if r.status != 0 || !r.out.contains(#""behavior":"allow""#) { bad.append("command: \(r.status) \(r.out)"); break }
        }
        var http: [Double] = []
        if let token = daemon.hookToken() {
            let body = try String(contentsOfFile: input, encoding: .utf8)
            let conn = try HTTPConn(port: daemon.port)
            defer { conn.close() }
            for _ in 0..<decisions {
                let r = try conn.post("/hooks/claude", token: token, body: body, headers: "X-CodingBridge-Timeout: 5\r\n")
                http.append(r.ms)
                if r.status != 200 || !r.body.contains(#""behavior":"allow""#) { bad.append("http: \(r.status) \(r.body)"); break }
            }
        }
        print("PermissionRequest Bash `rm -rf dist`, allowed at once by a connected local client (approval.respond on its first notification), \(decisions) each:")
        print(line("command hook, spawn -> allow printed -> exit", cmd) + String(format: "   %+.2f ms over the start p50 above", percentile(cmd, 0.5) - start))
        if !http.isEmpty { print(line("http hook, POST -> 200 with the allow", http, unit: .us)) }
        print("  checked: \(cmd.count + http.count - bad.count)/\(cmd.count + http.count) printed or answered the allow decision; \(answerer.answered) approvals answered")
        if let first = bad.first { print("  UNEXPECTED (\(bad.count)): \(first)") }
    }
}

// MARK: - helpers

enum HookBenchUnit { case ms, us }

private func pad(_ s: String) -> String { s.count >= 56 ? s + " " : s + String(repeating: " ", count: 56 - s.count) }

private func percentile(_ t: [Double], _ q: Double) -> Double {
    let s = t.sorted()
    return s.isEmpty ? .nan : s[min(s.count - 1, Int(Double(s.count) * q))]
}

private func line(_ name: String, _ t: [Double], unit: HookBenchUnit = .ms) -> String {
    let p50 = percentile(t, 0.5), p99 = percentile(t, 0.99)
    switch unit {
    case .ms: return pad("  " + name) + String(format: " p50 %7.2f ms  p99 %7.2f ms", p50, p99)
    case .us: return pad("  " + name) + String(format: " p50 %7.0f us  p99 %7.0f us", p50 * 1000, p99 * 1000)
    }
}

/// Each closure once per round, `runs` rounds after 3 unrecorded warm-up
/// rounds (page cache, the daemon's first session).
private func interleaved(_ rows: [() throws -> Double], runs: Int) throws -> [[Double]] {
    var t = [[Double]](repeating: [], count: rows.count)
    for round in 0..<(runs + 3) {
        for (i, row) in rows.enumerated() {
            let ms = try row()
            if round >= 3 { t[i].append(ms) }
        }
    }
    return t
}

/// posix_spawn -> waitpid wall time (Foundation's Process adds its own
/// threads and pipes); the child's stdout and stderr land in files read
/// after the clock stops.
private func spawnTimed(_ path: String, _ args: [String], stdin: String, out: String, err: String) throws
    -> (ms: Double, status: Int32, out: String, err: String) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let t0 = DispatchTime.now().uptimeNanoseconds
    let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
    guard rc == 0 else { throw ValidationError("cannot start \(path): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let ms = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6
    let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    let read = { (p: String) in (try? String(contentsOfFile: p, encoding: .utf8)) ?? "" }
    return (ms, code, read(out), read(err))
}

/// One kept-alive HTTP/1.1 connection to the loopback listener.
final class HTTPConn {
    let fd: Int32
    private var buf: [UInt8] = []

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { Glibc.close(fd); throw ValidationError("connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
    }

    func close() { Glibc.close(fd) }

    /// Write the request, read one Content-Length framed answer; wall time in ms.
    func post(_ path: String, token: String, body: String, headers: String = "") throws -> (ms: Double, status: Int, body: String) {
        let req = Array(("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n" + headers
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body).utf8)
        let t0 = DispatchTime.now().uptimeNanoseconds
        var off = 0
        while off < req.count {
            let n = req.withUnsafeBytes { send(fd, $0.baseAddress! + off, $0.count - off, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw ValidationError("http write failed") }
            off += n
        }
        let (status, answer) = try readAnswer()
        return (Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6, status, answer)
    }

    private func readAnswer() throws -> (Int, String) {
        let sep: [UInt8] = [13, 10, 13, 10]
        while true {
            if let end = buf.indices.dropLast(3).first(where: { buf[$0..<$0 + 4].elementsEqual(sep) }) {
                let head = String(decoding: buf[..<end], as: UTF8.self).lowercased()
                let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
                if buf.count >= end + 4 + length {
                    let body = String(decoding: buf[(end + 4)..<(end + 4 + length)], as: UTF8.self)
                    buf.removeFirst(end + 4 + length)
                    return (status, body)
                }
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw ValidationError("the listener closed the http connection") }
            buf += chunk[0..<n]
        }
    }
}

/// A local client taking notifications that allows every hook approval it
/// is told of, on its own thread, at once.
final class Answerer: @unchecked Sendable {
    private let c: SockClient
    private let lock = NSLock()
    private var seen = Set<String>()
    var answered: Int { lock.lock(); defer { lock.unlock() }; return seen.count }

    init(path: String) throws {
        c = try SockClient(path)
        c.write("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"clientInfo\":{\"name\":\"cb-bench answerer\"}}}\n")
        _ = try c.readLine()
        Thread { [self] in
            while let l = try? c.readLine() {
                guard let o = try? JSONSerialization.jsonObject(with: Data(l)) as? [String: Any], o["method"] != nil else { continue }
                for id in Answerer.requestIds(o) { allow(id) }
            }
        }.start()
    }

    private func allow(_ id: String) {
        lock.lock()
        let new = seen.insert(id).inserted
        lock.unlock()
        if new { c.write("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"approval.respond\",\"params\":{\"requestId\":\"\(id)\",\"decision\":\"allow\"}}\n") }
    }

    /// The approval ids a notification shows: banner.show and
    /// notification.post carry "approval:<requestId>" as their id.
    static func requestIds(_ v: Any) -> [String] {
        if let o = v as? [String: Any] {
            let own = (o["id"] as? String).flatMap { $0.hasPrefix("approval:") ? [String($0.dropFirst(9))] : nil } ?? []
            return own + o.values.flatMap { requestIds($0) }
        }
        if let a = v as? [Any] { return a.flatMap { requestIds($0) } }
        return []
    }

    func stop() { c.close() }
}
