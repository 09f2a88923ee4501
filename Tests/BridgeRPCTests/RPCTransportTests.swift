import Testing
@testable import BridgeRPC
import BridgeCore

/// A server on its own loop with a test method table, driven in-process.
private func makeServer(_ register: (MethodTable) -> Void = { _ in }, maxMessageBytes: Int = 16 << 20)
    -> (RPCServer, InProcessClient)
{
    var o = ServerOptions()
    o.maxMessageBytes = maxMessageBytes
    let env = ServerEnvironment(loop: EventLoop(), options: o)
    let table = MethodTable()
    table.on("echo") { p, _ in p.raw ?? .null }
    register(table)
    let server = try! RPCServer(env: env, methods: table)
    return (server, server.makeInProcessClient())
}

private func lines(_ s: String) -> [JSON] {
    s.split(separator: "\n").map { JSON.parse(String($0))! }
}

private func initialize(_ c: InProcessClient) {
    let r = c.request("initialize", ["clientInfo": ["name": "unit"]])
    #expect(r.first?["result"]?["serverInfo"]?["name"] == "codingbridge")
}

@Suite struct CodecTests {
    @Test func pingIsAnsweredInC() {
        let (server, c) = makeServer()
        #expect(c.send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n") == "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")
        #expect(server.endpoint.counters.answeredInC == 1)
        #expect(server.endpoint.counters.dispatched == 0)
    }

    @Test(arguments: [
        ("{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"ping\"}", JSON.string("s")),
        ("{\"jsonrpc\":\"2.0\",\"id\":-3,\"method\":\"ping\"}", JSON.int(-3)),
        ("{\"jsonrpc\":\"2.0\",\"id\":2.5,\"method\":\"ping\"}", JSON.double(2.5)),
        ("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", JSON.null),
    ])
    func idKindsAreEchoed(msg: String, id: JSON) {
        let (_, c) = makeServer()
        let r = lines(c.send(msg + "\n"))
        #expect(r.count == 1)
        #expect(r[0]["id"] == id)
        #expect(r[0]["result"] == .object([:]))
    }

    @Test(arguments: [
        ("{", -32700),
        ("[]", -32600),
        ("1", -32600),
        ("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":\"x\"}", -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", -32600),
        ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}", -32002),
    ])
    func badEnvelopes(msg: String, code: Int64) {
        let (_, c) = makeServer()
        let r = lines(c.send(msg + "\n"))
        #expect(r.count == 1)
        #expect(r[0]["error"]?["code"] == .int(code))
        #expect(r[0]["error"]?["data"]?.objectValue != nil)
        // and the next message is still served
        #expect(lines(c.send("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n")).first?["id"] == 9)
    }

    @Test func invalidUTF8IsAParseError() {
        let (_, c) = makeServer()
        var bytes = Array("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"s\":\"".utf8)
        bytes += [0xC3, 0x28] + Array("\"}}\n".utf8)
        let out = String(decoding: c.send(raw: bytes), as: UTF8.self)
        #expect(lines(out).first?["error"]?["code"] == -32700)
    }

    @Test func nestingIsBounded() {
        let (_, c) = makeServer()
        initialize(c)
        let deep = String(repeating: "[", count: 129) + String(repeating: "]", count: 129)
        let r = lines(c.send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{\"a\":\(deep)}}\n"))
        #expect(r.first?["error"]?["code"] == -32700)
        #expect(r.first?["error"]?["data"]?["reason"] == "nesting too deep")
        let ok = String(repeating: "[", count: 120) + String(repeating: "]", count: 120)
        let r2 = lines(c.send("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\",\"params\":{\"a\":\(ok)}}\n"))
        #expect(r2.first?["result"] != nil)
    }

    @Test func batchesFollowTheSpec() {
        let (_, c) = makeServer()
        initialize(c)
        let out = c.send("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{\"x\":1}},{\"jsonrpc\":\"2.0\",\"method\":\"echo\"},{\"foo\":1},{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}]\n")
        let r = lines(out)
        #expect(r.count == 1)
        let arr = r[0].arrayValue ?? []
        #expect(arr.count == 3)
        #expect(arr[0]["result"] == ["x": 1])
        #expect(arr[1]["error"]?["code"] == -32600)
        #expect(arr[2]["result"] == .object([:]))
        // all notifications: nothing at all
        #expect(c.send("[{\"jsonrpc\":\"2.0\",\"method\":\"echo\"},{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}]\n") == "")
    }
}

@Suite struct FramingTests {
    @Test func lspRoundTripAndCaseInsensitiveHeaders() {
        let (server, c) = makeServer()
        let body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"
        let out = c.send("content-LENGTH: \(body.utf8.count)\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n\(body)")
        let reply = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"
        #expect(out == "Content-Length: \(reply.utf8.count)\r\n\r\n\(reply)")
        #expect(c.connection.framing == .lsp)
        _ = server
    }

    @Test func ndjsonIsDetectedAndKept() {
        let (_, c) = makeServer()
        _ = c.send("\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n")
        #expect(c.connection.framing == .ndjson)
    }

    @Test func splitAtEveryByte() {
        let (_, c) = makeServer()
        let body = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}"
        let msg = Array("Content-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
        var out = [UInt8]()
        for _ in 0..<3 { for b in msg { out += c.send(raw: [b]) } }
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.ranges(of: "\"id\":7").count == 3)
    }

    @Test func oversizedMessageIsSkippedNextIsKept() {
        let (_, c) = makeServer(maxMessageBytes: 100)
        let big = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"s\":\"" + String(repeating: "x", count: 500) + "\"}}"
        let r = lines(c.send(big + "\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n"))
        #expect(r.count == 2)
        #expect(r[0]["error"]?["code"] == -32600)
        #expect(r[0]["error"]?["data"]?["limit"] == 100)
        #expect(r[1]["id"] == 2)
    }

    @Test func oversizedLSPBodyIsSkippedNextIsKept() {
        let (_, c) = makeServer(maxMessageBytes: 100)
        let body = String(repeating: " ", count: 300)
        let ok = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"
        let out = c.send("Content-Length: 300\r\n\r\n\(body)Content-Length: \(ok.utf8.count)\r\n\r\n\(ok)")
        #expect(out.contains("\"limit\":100"))
        #expect(out.contains("\"id\":2,\"result\":{}"))
    }

    @Test func badContentLengthResyncs() {
        let (_, c) = makeServer()
        let ok = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"
        let out = c.send("Content-Length: 1x\r\n\r\n{}Content-Length: \(ok.utf8.count)\r\n\r\n\(ok)")
        #expect(out.contains("-32700"))
        #expect(out.contains("\"id\":2,\"result\":{}"))
    }

    @Test func eofInsideABodyIsReported() {
        let (_, c) = makeServer()
        _ = c.send("Content-Length: 50\r\n\r\n{\"jsonrpc\"")
        c.sendEOF()
        #expect(c.takeOutput().contains("stream ended inside a message body"))
    }

    @Test func finalLineWithoutNewlineIsAnsweredAtEOF() {
        let (_, c) = makeServer()
        #expect(c.send("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}") == "")
        c.sendEOF()
        #expect(c.takeOutput() == "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n")
    }
}

@Suite struct ServerTests {
    @Test func lifecycleGating() {
        let (server, c) = makeServer()
        #expect(c.request("echo", ["a": 1]).first?["error"]?["code"] == -32002)
        initialize(c)
        #expect(c.request("initialize").first?["error"]?["code"] == -32600)
        #expect(c.request("echo", ["a": 1]).first?["result"] == ["a": 1])
        #expect(c.request("shutdown").first?["result"] == .null)
        #expect(server.phase == .shuttingDown)
        #expect(c.request("echo").first?["error"]?["code"] == -32600)
        #expect(c.request("ping").first?["result"] == .object([:]))
        _ = c.notify("exit")
        #expect(server.exitCode == 0)
    }

    @Test func exitWithoutShutdownIsOne() {
        let (server, c) = makeServer()
        initialize(c)
        _ = c.notify("exit")
        #expect(server.exitCode == 1)
    }

    @Test func rpcDiscoverIsTheEmbeddedDocument() {
        let (_, c) = makeServer()
        let r = c.request("rpc.discover").first?["result"]
        #expect(r == JSON.parse(OpenRPCDocument.text))
    }

    @Test func asyncHandlerAnswersLater() {
        var pending: [RPCReply] = []
        let (_, c) = makeServer { t in
            t.onAsync("later") { _, _, reply in pending.append(reply) }
        }
        initialize(c)
        #expect(c.request("later").isEmpty)
        #expect(c.request("later").isEmpty)
        #expect(pending.count == 2)
        pending[1](.success("second"))
        pending[0](.failure(.application(-32001, "expired", data: ["requestId": "r1"])))
        let r = lines(c.takeOutput())
        #expect(r.count == 2)
        #expect(r[0]["result"] == "second")
        #expect(r[1]["error"]?["code"] == -32001)
        #expect(r[1]["error"]?["data"]?["requestId"] == "r1")
        // a second reply to the same request is ignored
        pending[1](.success("again"))
        #expect(c.takeOutput() == "")
    }

    @Test func batchWaitsForItsAsyncMembers() {
        var pending: [RPCReply] = []
        let (_, c) = makeServer { t in
            t.onAsync("later") { _, _, reply in pending.append(reply) }
        }
        initialize(c)
        let out = c.send("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"later\"},{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}]\n")
        #expect(out == "")
        pending[0](.success(true))
        let r = lines(c.takeOutput())
        #expect(r.count == 1)
        #expect(r[0].arrayValue?.count == 2)
        #expect(r[0].arrayValue?.first?["result"] == true)
    }

    @Test func droppedAsyncReplyStillAnswers() {
        let (_, c) = makeServer { t in
            t.onAsync("forget") { _, _, _ in }
        }
        initialize(c)
        let r = c.request("forget")
        #expect(r.first?["error"]?["code"] == -32603)
    }

    @Test func handlerErrorsMapToJSONRPC() {
        struct Boom: Error {}
        let (_, c) = makeServer { t in
            t.on("typed") { p, _ in .string(try p.required("name", as: String.self)) }
            t.on("boom") { _, _ in throw Boom() }
        }
        initialize(c)
        let e = c.request("typed", ["name": 3]).first?["error"]
        #expect(e?["code"] == -32602)
        #expect(e?["data"]?["param"] == "name")
        #expect(e?["data"]?["expected"] == "string")
        #expect(c.request("typed", ["name": "x"]).first?["result"] == "x")
        #expect(c.request("boom").first?["error"]?["code"] == -32603)
        #expect(c.request("missing").first?["error"]?["code"] == -32601)
    }

    @Test func broadcastReachesInitializedClientsOnly() {
        let (server, a) = makeServer()
        let b = server.makeInProcessClient()
        initialize(a)
        server.env.broadcast("session.changed", ["session": ["id": "s1"]])
        let got = lines(a.takeOutput())
        #expect(got.count == 1)
        #expect(got[0]["method"] == "session.changed")
        #expect(got[0]["params"]?["session"]?["id"] == "s1")
        #expect(got[0]["id"] == nil)
        #expect(b.takeOutput() == "")
    }

    @Test func notificationsToHandlersGetNoReply() {
        var calls = 0
        let (_, c) = makeServer { t in t.on("count") { _, _ in calls += 1; return .null } }
        initialize(c)
        #expect(c.notify("count").isEmpty)
        #expect(calls == 1)
    }

    @Test func deviceIdReachesTheContext() {
        var seen: String?
        let (_, c) = makeServer { t in t.on("who") { _, ctx in seen = ctx.deviceID; return .null } }
        _ = c.request("initialize", ["deviceId": "ipad"])
        _ = c.request("who")
        #expect(seen == "ipad")
    }

    @Test func inProcessClientsDoNotAccumulate() {
        let (server, first) = makeServer()
        for _ in 0..<100 {
            let c = server.makeInProcessClient()
            _ = c.send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        }
        #expect(server.endpoint.allConnections.count == 1)
        _ = first
    }

    @Test func builtinsCannotBeRegisteredTwice() {
        let env = ServerEnvironment(loop: EventLoop(), options: ServerOptions())
        let t = MethodTable()
        t.on("ping") { _, _ in .null }
        #expect(throws: RPCError.self) { try RPCServer(env: env, methods: t) }
    }

    @Test func embeddedSpecListsEveryBuiltin() {
        let doc = JSON.parse(OpenRPCDocument.text)
        let names = Set((doc?["methods"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue })
        for b in RPCServer.builtins { #expect(names.contains(b), "\(b) missing from openrpc.json") }
    }
}

@Suite struct JSONEncodingTests {
    @Test(arguments: [
        JSON.null, true, false, 0, -9_223_372_036_854_775_807, 1.5, -0.25, 1e300, 0.1,
        "", "plain", "quote\" backslash\\ slash/", "\n\r\t\u{08}\u{0C}\u{01}\u{1F}\u{7F}", "nul\u{0}inside",
        "é ☃ 😀 \u{2028}", [], [:], [1, "a", nil, [true]], ["k\"ey": ["nested": [1, 2, ["x": "y"]]]],
    ] as [JSON])
    func encodingRoundTripsThroughJansson(value: JSON) {
        let text = String(decoding: value.encoded, as: UTF8.self)
        #expect(JSON.parse(text) == value, "\(text)")
    }

    @Test func nonFiniteDoublesBecomeNull() {
        #expect(String(decoding: JSON.double(.nan).encoded, as: UTF8.self) == "null")
        #expect(String(decoding: JSON.array([.double(.infinity)]).encoded, as: UTF8.self) == "[null]")
    }

    @Test func controlCharactersAreEscapedLikeJansson() {
        #expect(String(decoding: JSON.string("\u{01}\n\"").encoded, as: UTF8.self) == "\"\\u0001\\n\\\"\"")
    }
}

/// The endpoint and its connections directly, without a server.
@Suite struct EndpointTests {
    private func notification(_ pad: Int) -> [UInt8] {
        Array(("{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"pad\":\"" + String(repeating: "x", count: pad) + "\"}}").utf8)
    }

    @Test func notificationsOverTheLimitAreDroppedAndCounted() {
        let ep = RPCEndpoint(loop: EventLoop())
        #expect(ep.notifyLimitBytes == 256 << 10)
        let c = ep.openInMemory()
        #expect(c.transport == .memory)
        ep.notifyLimitBytes = 100
        let n = notification(40) // 91 bytes framed
        #expect(c.sendNotification(serialized: n))
        #expect(c.sendNotification(serialized: n)) // 91 queued: not over the limit yet
        #expect(!c.sendNotification(serialized: n))
        #expect(!c.notify("n", nil))
        #expect(c.droppedNotifications == 2)
        #expect(c.takeOutput().count == 2 * (n.count + 1))
        #expect(c.sendNotification(serialized: n)) // the reader caught up
        let later = ep.openInMemory() // the limit holds for connections opened later too
        #expect(later.sendNotification(serialized: n) && later.sendNotification(serialized: n))
        #expect(!later.sendNotification(serialized: n))
        c.close()
        #expect(!c.sendNotification(serialized: n))
        #expect(c.droppedNotifications == 2) // closed is not a drop
    }

    @Test func closeThenRunsOnceEveryConnectionHasClosed() {
        let ep = RPCEndpoint(loop: EventLoop())
        var ran = 0
        ep.close { ran += 1 }
        #expect(ran == 1) // nothing open
        let a = ep.openInMemory(), b = ep.openInMemory()
        _ = (a, b)
        ep.close { ran += 1 }
        #expect(ran == 2)
        #expect(ep.allConnections.isEmpty && a.isClosed && b.isClosed)
    }

    @Test func connectionsAndRepliesOutliveTheirEndpoint() {
        var conn: RPCConnection?
        var pending: RPCResponder?
        do {
            let ep = RPCEndpoint(loop: EventLoop())
            ep.onCall = { call in pending = call.responder }
            var closedEvents = 0
            ep.onClosed = { _ in closedEvents += 1 }
            conn = ep.openInMemory()
            conn!.feed("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"later\"}\n")
            #expect(pending != nil)
            _ = closedEvents
        } // the endpoint goes with a connection and a request still open
        #expect(conn!.isClosed)
        conn!.feed("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n") // ignored, crashes nothing
        pending!.result(.string("too late")) // goes nowhere
        #expect(conn!.takeOutput().isEmpty)
        pending = nil
        conn = nil // the last reference: C frees the connection and the endpoint (ASan/LSan)
    }
}
