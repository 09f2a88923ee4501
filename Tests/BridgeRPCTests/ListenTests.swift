import Testing
@testable import BridgeRPC
import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// A server with a unix-socket listener in a fresh directory, driven by
/// running its loop from the test; clients are real sockets.
private final class SocketHarness {
    let server: RPCServer
    let dir: String
    let path: String
    var pending: [RPCReply] = []
    private var fds: [Int32] = []

    init(policy: SlowClientPolicy = SlowClientPolicy()) throws {
        var template = Array("/tmp/cb-listen-unit-XXXXXX".utf8CString)
        dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        path = dir + "/s.sock"
        let env = ServerEnvironment(loop: EventLoop(), options: ServerOptions())
        let table = MethodTable()
        table.on("who") { _, ctx in ["connection": .int(Int64(ctx.connectionID)), "device": ctx.deviceID.map { .string($0) } ?? .null] }
        let box = Box()
        table.onAsync("later") { _, _, reply in box.replies.append(reply) }
        server = try RPCServer(env: env, methods: table)
        server.policy = policy
        try server.listen(unixPath: path)
        self.box = box
    }
    final class Box { var replies: [RPCReply] = [] }
    let box: Box

    deinit {
        for fd in fds { close(fd) }
        server.closeListeners()
        unlink(path + ".lock")
        rmdir(dir)
    }

    func connect() -> Int32 {
        let fd = try! UnixSocket.connect(path)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        fds.append(fd)
        spin()
        return fd
    }

    func write(_ fd: Int32, _ text: String) {
        let b = Array(text.utf8)
        #expect(b.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == b.count)
    }

    /// Runs the loop a little, then returns what arrived on fd (nil at EOF
    /// or reset with nothing read).
    func read(_ fd: Int32, turns: Int = 20) -> String? {
        spin(turns)
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 { out += buf[0..<n]; continue }
            if n == 0 || (n < 0 && errno == ECONNRESET) { return out.isEmpty ? nil : String(decoding: out, as: UTF8.self) }
            return String(decoding: out, as: UTF8.self)
        }
    }

    func spin(_ turns: Int = 20) {
        for _ in 0..<turns { server.env.loop.runOnce(); usleep(200) }
    }

    func request(_ fd: Int32, _ id: Int, _ method: String, _ params: JSON? = nil) -> JSON? {
        var msg: [String: JSON] = ["jsonrpc": "2.0", "id": .int(Int64(id)), "method": .string(method)]
        if let params { msg["params"] = params }
        write(fd, msg.json.serialized() + "\n")
        for _ in 0..<50 {
            if let text = read(fd), let m = text.split(separator: "\n").compactMap({ JSON.parse(String($0)) })
                .first(where: { $0["id"] == .int(Int64(id)) }) { return m }
        }
        return nil
    }
}

private extension Dictionary where Key == String, Value == JSON {
    var json: JSON { .object(self) }
}

private func lines(_ s: String) -> [JSON] { s.split(separator: "\n").compactMap { JSON.parse(String($0)) } }

@Suite(.serialized) struct ListenTests {
    @Test("audience: all or one connection; never a client that did not initialize or said notifications: false")
    func audienceSelectsConnections() throws {
        let h = try SocketHarness()
        let a = h.connect(), b = h.connect(), c = h.connect()
        let quiet = h.connect() // never initialized: never notified
        let caller = h.connect() // only calls (the hook)
        _ = h.request(a, 1, "initialize", ["deviceId": "iphone"])
        _ = h.request(b, 1, "initialize", ["deviceId": "ipad"])
        _ = h.request(c, 1, "initialize", ["deviceId": "ipad"])
        #expect(h.request(caller, 1, "initialize", ["capabilities": ["notifications": false]])?["result"] != nil)
        let ids = h.server.endpoint.allConnections.map(\.id) // accepted in order
        func who(_ audience: Audience) -> [Bool] {
            h.server.env.send(audience, "approval.resolved", ["requestId": "r1"])
            return [a, b, c, quiet, caller].map { fd in
                lines(h.read(fd) ?? "").contains { $0["method"] == "approval.resolved" && $0["params"]?["requestId"] == "r1" }
            }
        }
        #expect(who(.all) == [true, true, true, false, false])
        #expect(who(.connection(ids[1])) == [false, true, false, false, false])
        #expect(who(.connection(ids[4])) == [false, false, false, false, false])
    }

    @Test func eachSocketClientHasItsOwnLifecycleAndDevice() throws {
        let h = try SocketHarness()
        let a = h.connect(), b = h.connect()
        let ra = h.request(a, 1, "initialize", ["deviceId": "iphone"])
        #expect(ra?["result"]?["deviceId"] == "iphone")
        // b has not initialized: refused, whatever a did
        #expect(h.request(b, 1, "who")?["error"]?["code"] == -32002)
        let rb = h.request(b, 2, "initialize")
        let generated = rb?["result"]?["deviceId"]?.stringValue
        #expect(generated?.hasPrefix("device-") == true)
        // RPCContext.deviceID is the client's, per connection
        #expect(h.request(a, 2, "who")?["result"]?["device"] == "iphone")
        #expect(h.request(b, 3, "who")?["result"]?["device"] == generated.map { .string($0) })
        // exit on b closes b only; the process does not stop
        #expect(h.request(b, 4, "shutdown")?["result"] == .null)
        #expect(h.request(b, 5, "who")?["error"]?["code"] == -32600)
        h.write(b, "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}\n")
        _ = h.read(b, turns: 50)
        #expect(h.read(b) == nil) // EOF
        #expect(h.server.exitCode == nil)
        #expect(h.request(a, 3, "ping")?["result"] == .object([:]))
        #expect(h.server.endpoint.allConnections.count == 1)
    }

    @Test func asyncReplyToAGoneClientIsDropped() throws {
        let h = try SocketHarness()
        let a = h.connect()
        _ = h.request(a, 1, "initialize")
        h.write(a, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"later\"}\n")
        h.spin()
        #expect(h.box.replies.count == 1)
        close(a)
        h.spin(50)
        #expect(h.server.endpoint.allConnections.isEmpty)
        h.box.replies[0](.success("too late")) // goes nowhere, crashes nothing
        let b = h.connect()
        #expect(h.request(b, 1, "ping")?["result"] == .object([:]))
    }

    @Test func slowReaderLosesNotificationsThenTheConnection() throws {
        var policy = SlowClientPolicy()
        policy.notifyLimitBytes = 4096
        policy.stallTimeoutMs = 0
        policy.checkIntervalMs = 3_600_000 // checked by hand below
        let h = try SocketHarness(policy: policy)
        let slow = h.connect(), fine = h.connect()
        _ = h.request(slow, 1, "initialize", ["deviceId": "slow"])
        _ = h.request(fine, 1, "initialize", ["deviceId": "fine"])
        let big = JSON.string(String(repeating: "x", count: 1000))
        // far more than the kernel buffers: the rest would queue in the server
        for i in 0..<4000 {
            h.server.env.broadcast("session.changed", ["i": .int(Int64(i)), "pad": big])
            h.server.env.loop.runOnce()
            if i % 20 == 0 { _ = h.read(fine, turns: 1) } // fine reads as it goes
        }
        let conn = h.server.router.all.first { $0.deviceID == "slow" }!.io
        #expect(h.server.router.droppedNotifications > 0)
        #expect(conn.droppedNotifications == h.server.router.droppedNotifications)
        #expect(conn.queuedBytes <= policy.notifyLimitBytes + 2048) // bounded: at most one message past the limit
        // no progress between checks -> dropped; the reader still gets EOF
        for _ in 0..<3 {
            h.server.checkSlowClients()
            h.spin(2)
        }
        h.spin(20)
        #expect(h.server.router.droppedClients == 1)
        #expect(conn.isClosed)
        var sawEOF = false
        for _ in 0..<200 where !sawEOF { sawEOF = h.read(slow, turns: 2) == nil }
        #expect(sawEOF)
        #expect(h.request(fine, 2, "ping")?["result"] == .object([:]))
    }

    /// Tearing a server down while a client that never reads still has output
    /// in flight: the connection's cancelled writes and handle closes run
    /// while it is still alive (ASan: no use after free), and nothing hangs.
    @Test func serverFreedWithOutputInFlightToAClientThatNeverReads() throws {
        var template = Array("/tmp/cb-listen-unit-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        let path = dir + "/s.sock"
        var fd: Int32 = -1
        do {
            var policy = SlowClientPolicy()
            policy.notifyLimitBytes = 64 << 20 // keep queueing: writes stay in flight
            let server = try RPCServer(env: ServerEnvironment(loop: EventLoop(), options: ServerOptions()), methods: MethodTable())
            server.policy = policy
            try server.listen(unixPath: path)
            fd = try UnixSocket.connect(path)
            let hello = Array("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n".utf8)
            _ = hello.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            for _ in 0..<50 { server.env.loop.runOnce(); usleep(200) }
            let big = JSON.string(String(repeating: "y", count: 4000))
            for i in 0..<2000 {
                server.env.broadcast("session.changed", ["i": .int(Int64(i)), "pad": big])
                if i % 100 == 0 { server.env.loop.runOnce() }
            }
            let conn = server.endpoint.allConnections.first { $0.isOpen }
            #expect((conn?.queuedBytes ?? 0) > 0) // output still waiting for the reader
            server.closeListeners()
        } // the server, its endpoint and its loop go here, the client still connected
        close(fd)
        unlink(path + ".lock")
        rmdir(dir)
    }

    @Test func refusedPathsSayWhy() throws {
        let h = try SocketHarness()
        let second = try RPCServer(env: ServerEnvironment(loop: EventLoop(), options: ServerOptions()), methods: MethodTable())
        #expect(throws: ListenError.self) { try second.listen(unixPath: h.path) }
        do { try second.listen(unixPath: h.path)
            Issue.record("listen did not fail")
        } catch let e as ListenError {
            #expect(e.kind == .alreadyServed)
            #expect(e.description.contains("already listening on \(h.path)"))
        }
        do { try second.listen(unixPath: "/nonexistent-dir-\(getpid())/s.sock")
            Issue.record("listen did not fail")
        } catch let e as ListenError {
            #expect(e.kind == .noDirectory)
        }
        do { try second.listen(unixPath: "/tmp/" + String(repeating: "y", count: 200))
            Issue.record("listen did not fail")
        } catch let e as ListenError {
            #expect(e.kind == .pathTooLong)
            #expect(e.description.contains("at most \(UnixSocket.maxPathBytes)"))
        }
    }
}
