import ArgumentParser
import BridgeCore
import BridgeEngine
import BridgeRPC
import CBridge
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench engine`: the engine behind the real stdio server.
///  1. latency: agent.event (approval_request) written -> notification.post
///     read, sequential, vs a ping round trip on the same server (target p99 <= 1 ms);
///  2. sustained agent events/s, pipelined, vs the same count of trivial Swift
///     handler calls (debug.echo) on the same server (target >= 50k/s);
///  3. memory per idle session with 10k sessions (heap delta, mallinfo2), vs
///     a bare [String: String] of the same ids and paths (target <= 4 KB).
struct EngineBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "Engine over stdio: event -> notification latency, sustained events/s, memory per idle session.")

    @Option(help: "Sequential approval round trips for the latency figure.") var latencyRounds = 5_000
    @Option(help: "Pipelined agent events for the throughput figure.") var events = 200_000
    @Option(help: "Sessions for the memory figure.") var sessions = 10_000
    @Option(help: "Directory holding codingbridge (default: next to cb-bench).") var binDir: String?

    func run() throws {
        let server = try BenchBinary.require("codingbridge", binDir: binDir)
        print("cb-bench engine: \(server) serve --ephemeral --manual-clock")
        print("")
        try latency(server)
        print("")
        try throughput(server)
        print("")
        try memory()
    }

    static let initialize = "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{\"clientInfo\":{\"name\":\"cb-bench\"}}}\n"

    // MARK: 1. event in -> notification out

    func latency(_ server: String) throws {
        let c = try LineChild(server, ["serve", "--ephemeral", "--manual-clock"])
        defer { c.finish() }
        try c.send(Self.initialize); try c.waitFor("\"id\":\"init\"")
        try c.send("{\"jsonrpc\":\"2.0\",\"id\":\"bg\",\"method\":\"app.update\",\"params\":{\"phase\":\"background\"}}\n")
        try c.waitFor("\"id\":\"bg\"")
        try c.send("{\"jsonrpc\":\"2.0\",\"id\":\"st\",\"method\":\"agent.event\",\"params\":{\"sessionId\":\"s1\",\"type\":\"task_started\",\"projectName\":\"MyApp\"}}\n")
        try c.waitFor("\"id\":\"st\"")
        var ping: [Double] = [], event: [Double] = [], reply: [Double] = []
        for i in 0..<latencyRounds {
            var t0 = DispatchTime.now().uptimeNanoseconds
            try c.send("{\"jsonrpc\":\"2.0\",\"id\":\"p\(i)\",\"method\":\"ping\"}\n")
            try c.waitFor("\"id\":\"p\(i)\"")
            ping.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)

            t0 = DispatchTime.now().uptimeNanoseconds
            try c.send("{\"jsonrpc\":\"2.0\",\"id\":\"a\(i)\",\"method\":\"agent.event\",\"params\":{\"sessionId\":\"s1\",\"type\":\"approval_request\",\"requestId\":\"r\(i)\",\"toolName\":\"Bash\",\"input\":{\"command\":\"npm test\"}}}\n")
            try c.waitFor("\"notification.post\"")
            event.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
            try c.waitFor("\"id\":\"a\(i)\"")
            // Answer it so the queue stays at one (the realistic case).
            t0 = DispatchTime.now().uptimeNanoseconds
            try c.send("{\"jsonrpc\":\"2.0\",\"id\":\"d\(i)\",\"method\":\"approval.respond\",\"params\":{\"requestId\":\"r\(i)\",\"decision\":\"allow\"}}\n")
            try c.waitFor("\"id\":\"d\(i)\"")
            reply.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
        }
        func pct(_ a: [Double], _ p: Double) -> Double { let s = a.sorted(); return s[min(s.count - 1, Int(Double(s.count) * p))] }
        print("1. event in -> notification out over stdio (\(latencyRounds) sequential rounds)")
        print("   " + padded("", 42) + " p50 us   p99 us  p99.9 us   p99 vs ping")
        for (name, a) in [("baseline: ping round trip", ping), ("approval_request -> notification.post", event),
                          ("approval.respond -> reply (clear, resolve)", reply)] {
            print("   " + padded(name, 42) + String(format: "%7.1f  %7.1f  %8.1f   %6.2fx", pct(a, 0.5), pct(a, 0.99),
                         pct(a, 0.999), pct(a, 0.99) / pct(ping, 0.99)))
        }
        let p99 = pct(event, 0.99)
        print(String(format: "   target p99 <= 1000 us: %.1f us (%@)", p99, p99 <= 1000 ? "met" : "NOT met"))
    }

    // MARK: 2. sustained agent events/s

    func throughput(_ server: String) throws {
        // A realistic mix over 100 sessions: tool uses (several kinds), TodoWrite
        // progress, a task start now and then; the app in background so the
        // Live Activity is updated too. Sent as JSON-RPC notifications (no
        // reply each), then one ping whose reply marks the end.
        func agentEvents(_ n: Int) -> [UInt8] {
            var out = [UInt8]()
            out.reserveCapacity(n * 190)
            let tools = ["{\"toolName\":\"Read\",\"input\":{\"file_path\":\"Sources/App/Main.swift\"}",
                         "{\"toolName\":\"Bash\",\"input\":{\"command\":\"npm test\"}",
                         "{\"toolName\":\"Edit\",\"input\":{\"file_path\":\"Sources/App/Login.swift\"}",
                         "{\"toolName\":\"Grep\",\"input\":{\"pattern\":\"token\"}"]
            for i in 0..<n {
                let s = i % 100
                let body: String
                // Each session starts once, then works: mostly tool calls, a
                // TodoWrite update every tenth round (new progress every 1000 events).
                switch i < 100 ? -1 : (i / 100) % 10 {
                case -1: body = "{\"type\":\"task_started\",\"projectName\":\"Proj\(s)\""
                case 3:
                    let done = (i / 1000) % 5
                    let todos = (0..<5).map { k in "{\"content\":\"step \(k)\",\"activeForm\":\"Doing step \(k)\",\"status\":\"\(k < done ? "completed" : k == done ? "in_progress" : "pending")\"}" }
                    body = "{\"type\":\"progress\",\"todos\":[\(todos.joined(separator: ","))]"
                default: body = "{\"type\":\"tool_use\"," + tools[i % 4].dropFirst()
                }
                out += Array("{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":\(body),\"sessionId\":\"s\(s)\"}}\n".utf8)
            }
            return out
        }
        func echoes(_ n: Int) -> [UInt8] {
            var out = [UInt8]()
            for i in 0..<n { out += Array("{\"jsonrpc\":\"2.0\",\"method\":\"debug.echo\",\"params\":{\"sessionId\":\"s\(i % 100)\",\"type\":\"tool_use\",\"toolName\":\"Read\",\"input\":{\"file_path\":\"Sources/App/Main.swift\"}}}\n".utf8) }
            return out
        }
        var results: [(String, Double, Int)] = []
        for (name, payload) in [("baseline: debug.echo notifications", echoes(events)),
                                ("agent.event mix (tool_use 90%, TodoWrite progress)", agentEvents(events))] {
            let c = try LineChild(server, ["serve", "--ephemeral", "--manual-clock"])
            defer { c.finish() }
            try c.send(Self.initialize); try c.waitFor("\"id\":\"init\"")
            try c.send("{\"jsonrpc\":\"2.0\",\"id\":\"bg\",\"method\":\"app.update\",\"params\":{\"phase\":\"background\"}}\n")
            try c.waitFor("\"id\":\"bg\"")
            c.resetCounters()
            let t0 = DispatchTime.now().uptimeNanoseconds
            try c.sendInBackground(payload + Array("{\"jsonrpc\":\"2.0\",\"id\":\"end\",\"method\":\"ping\"}\n".utf8))
            try c.waitFor("\"id\":\"end\"")
            let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            results.append((name, Double(events) / dt, c.linesSeen))
        }
        print("2. sustained agent events over stdio (\(events) pipelined, 100 sessions, app in background)")
        print("   " + padded("", 52) + "  events/s   vs baseline   notifications out")
        for (name, rate, lines) in results {
            print("   " + padded(name, 52) + String(format: "%10.0f   %8.2fx   %10d", rate, rate / results[0].1, lines))
        }
        // Where the time goes: the same mix without pipes, and the engine alone.
        let mix = agentEvents(events)
        var options = ServerOptions()
        options.manualClock = true
        options.ephemeral = true
        let env = ServerEnvironment(loop: EventLoop(), options: options)
        let srv = try RPCServer(env: env)
        let client = srv.makeInProcessClient()
        _ = client.send(Self.initialize)
        _ = client.send("{\"jsonrpc\":\"2.0\",\"method\":\"app.update\",\"params\":{\"phase\":\"background\"}}\n")
        _ = client.discardOutput()
        func feedAll(_ payload: [UInt8]) -> Double {
            let t0 = DispatchTime.now().uptimeNanoseconds
            var off = 0
            while off < payload.count {
                let end = min(payload.count, off + 65536)
                let cut = (payload[off..<end].lastIndex(of: 10) ?? end - 1) + 1
                client.connection.feed(Array(payload[off..<cut]))
                _ = client.discardOutput()
                off = cut
            }
            return Double(events) / (Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
        }
        let echoInProc = feedAll(echoes(events))
        let inProc = feedAll(mix)
        var t0 = DispatchTime.now().uptimeNanoseconds
        var engine = Engine(services: env.engine.services)
        _ = engine.apply(.app(AppUpdate(phase: .background)), now: 0)
        let tools = [ToolUse(name: "Read", filePath: "Sources/App/Main.swift"), ToolUse(name: "Bash", command: "npm test"),
                     ToolUse(name: "Edit", filePath: "Sources/App/Login.swift"), ToolUse(name: "Grep", pattern: "token")]
        let ids = (0..<100).map { "s\($0)" }
        t0 = DispatchTime.now().uptimeNanoseconds
        var effects = 0
        for i in 0..<events {
            let kind: AgentEvent.Kind
            switch i < 100 ? -1 : (i / 100) % 10 {
            case -1: kind = .taskStarted(prompt: nil)
            case 3:
                let done = (i / 1000) % 5
                kind = .progress(todos: (0..<5).map { k in Todo(content: "step \(k)", status: k < done ? .completed : k == done ? .in_progress : .pending, activeForm: "Doing step \(k)") })
            default: kind = .toolUse(tools[i % 4])
            }
            effects += engine.apply(.agent(AgentEvent(sessionId: ids[i % 100], kind: kind)), now: Millis(i)).effects.count
        }
        let pure = Double(events) / (Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
        print("   " + padded("baseline in-process: debug.echo (no pipes)", 52) + String(format: "%10.0f", echoInProc))
        print("   " + padded("same mix in-process (no pipes)", 52) + String(format: "%10.0f   %8.2fx", inProc, inProc / echoInProc))
        print("   " + padded("same mix, engine.apply alone (\(effects) effects)", 52) + String(format: "%10.0f", pure))
        let rate = results[1].1
        print(String(format: "   target >= 50000 events/s over stdio: %.0f (%@)", rate, rate >= 50_000 ? "met" : "NOT met"))
    }

    // MARK: 3. memory per idle session

    func memory() throws {
        // Bytes handed out by malloc and not freed (glibc mallinfo2).
        func heap() -> Int { Int(cb_heap_bytes_in_use()) }
        let n = sessions
        let ids = (0..<n).map { "session-\($0)-7f3a9c2e" }
        // Baseline: the least any tracker must keep, id -> project path.
        let b0 = heap()
        var bare: [String: String] = [:]
        for id in ids { bare[id] = "/home/alex/code/project-\(id.count)/" + id }
        let bareBytes = heap() - b0
        // The server's engine, fed through the real dispatch (in-process client).
        var options = ServerOptions()
        options.manualClock = true
        options.ephemeral = true
        let env = ServerEnvironment(loop: EventLoop(), options: options)
        let srv = try RPCServer(env: env)
        let client = srv.makeInProcessClient()
        _ = client.send(Self.initialize)
        _ = env.engine.engine.sessions.count  // create the host before measuring
        _ = client.discardOutput()
        let m0 = heap()
        for (i, id) in ids.enumerated() {
            // A finished task: the common idle state (project known, status completed, history of one approval).
            let sid = "\"sessionId\":\"\(id)\",\"projectName\":\"project-\(i)\",\"projectPath\":\"/home/alex/code/project-\(i)\""
            _ = client.send("{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":{\(sid),\"type\":\"task_started\"}}\n" +
                            "{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":{\(sid),\"type\":\"tool_use\",\"toolName\":\"Bash\",\"input\":{\"command\":\"npm test\"}}}\n" +
                            "{\"jsonrpc\":\"2.0\",\"method\":\"agent.event\",\"params\":{\(sid),\"type\":\"task_completed\",\"summary\":\"All tests passed\"}}\n")
            _ = client.discardOutput()
        }
        let engineBytes = heap() - m0
        let count = env.engine.engine.sessions.count
        guard count == n else { throw ValidationError("expected \(n) sessions, engine has \(count)") }
        print("3. memory per idle session (\(n) sessions, heap delta, mallinfo2)")
        print(String(format: "   baseline: [String: String] id -> path      %7.0f bytes/session", Double(bareBytes) / Double(n)))
        print(String(format: "   engine sessions (via dispatch)             %7.0f bytes/session   %.2fx baseline",
                     Double(engineBytes) / Double(n), Double(engineBytes) / Double(max(1, bareBytes))))
        let per = Double(engineBytes) / Double(n)
        print(String(format: "   target <= 4096 bytes/session: %.0f (%@)", per, per <= 4096 ? "met" : "NOT met"))
        withExtendedLifetime(bare) {}
    }
}

/// A child process on pipes; reads lines and looks for markers.
private final class LineChild {
    let pid: pid_t
    let toChild: Int32
    let fromChild: Int32
    private var buf = [UInt8](repeating: 0, count: 1 << 16)
    private var pending = [UInt8]()   // bytes after the last newline seen
    private var lines: [[UInt8]] = []  // complete lines not yet inspected
    private(set) var linesSeen = 0
    private var writer: Thread?

    init(_ path: String, _ args: [String]) throws {
        let io = try ChildPipes(path, args)
        pid = io.pid
        toChild = io.toChild
        fromChild = io.fromChild
    }

    func finish() { ChildPipes.finish(pid: pid, toChild: toChild, fromChild: fromChild) }

    func resetCounters() { linesSeen = 0 }

    func send(_ text: String) throws {
        var t = text
        try t.withUTF8 { b in
            var off = 0
            while off < b.count {
                let n = write(toChild, b.baseAddress! + off, b.count - off)
                if n < 0 { if errno == EINTR { continue }; throw ValidationError("write to child failed") }
                off += n
            }
        }
    }

    /// Writes from a thread so the child's output can be drained meanwhile.
    func sendInBackground(_ bytes: [UInt8]) throws {
        let fd = toChild
        let t = Thread {
            bytes.withUnsafeBytes { b in
                var off = 0
                while off < b.count {
                    let n = write(fd, b.baseAddress! + off, min(65536, b.count - off))
                    if n < 0 { if errno == EINTR { continue }; return }
                    off += n
                }
            }
        }
        writer = t
        t.start()
    }

    /// Reads until a line containing `marker` arrives (lines before it are consumed).
    func waitFor(_ marker: String) throws {
        let m = Array(marker.utf8)
        while true {
            while !lines.isEmpty {
                let l = lines.removeFirst()
                if contains(l, m) { return }
            }
            let n = buf.withUnsafeMutableBytes { read(fromChild, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; throw ValidationError("read from child failed") }
            if n == 0 { throw ValidationError("child closed its output before \(marker)") }
            var start = 0
            for i in 0..<n where buf[i] == 10 {
                pending += buf[start..<i]
                lines.append(pending)
                pending = []
                linesSeen += 1
                start = i + 1
            }
            pending += buf[start..<n]
        }
    }

    private func contains(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
        guard hay.count >= needle.count, let first = needle.first else { return false }
        var i = 0
        while i + needle.count <= hay.count {
            if hay[i] == first && hay[i..<i + needle.count].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}

private func padded(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }
