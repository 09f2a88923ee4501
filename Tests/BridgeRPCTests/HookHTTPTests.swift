import Testing
@testable import BridgeRPC
import BridgeCore
import BridgeEngine

/// The http hooks' way in (`RPCServer.handleHookRequest`), called as the
/// network listener calls it, with the phone as an in-process client.
@Suite struct HookHTTPTests {
    /// What `respond` was given, in order.
    final class Responses {
        var got: [(status: Int, body: String)] = []
        var respond: HookRequestHandle.Respond { { [self] in got.append(($0, $1)) } }
        /// The first body, parsed.
        var json: JSON? { got.first.flatMap { JSON.parse($0.body) } }
    }

    private func server() -> (RPCServer, InProcessClient) {
        var o = ServerOptions()
        o.manualClock = true
        o.ephemeral = true
        let s = try! RPCServer(env: ServerEnvironment(loop: EventLoop(), options: o))
        let phone = s.makeInProcessClient()
        _ = phone.request("initialize", ["clientInfo": ["name": "phone"], "deviceId": "iphone"])
        return (s, phone)
    }

    private func bearer(_ s: RPCServer) -> String { "Bearer " + s.env.hookToken!.value }

    private func input(_ event: String, _ fields: [String: JSON] = [:]) -> [UInt8] {
        var o: [String: JSON] = ["session_id": "h1", "cwd": "/w/p", "hook_event_name": .string(event)]
        o.merge(fields) { $1 }
        return Array(JSON.object(o).serialized().utf8)
    }

    private func permission(_ command: String) -> [UInt8] {
        input("PermissionRequest", ["tool_name": "Bash", "tool_input": ["command": .string(command)]])
    }

    @discardableResult
    private func post(_ s: RPCServer, _ body: [UInt8], auth: String?, timeout: String? = nil, _ r: Responses) -> HookRequestHandle {
        let h = s.handleHookRequest(body: body, authorization: auth, timeout: timeout, peer: "127.0.0.1:5", respond: r.respond)
        s.env.store?.flush()
        return h
    }

    private func result(_ c: InProcessClient, _ method: String, _ params: JSON) -> JSON? {
        c.request(method, params).first { $0["id"] != nil }?["result"]
    }

    private func pending(_ phone: InProcessClient) -> [String] {
        (result(phone, "approval.list", [:])?["approvals"]?.arrayValue ?? []).compactMap { $0["requestId"]?.stringValue }
    }

    @Test(arguments: [nil, "", "Bearer", "Bearer wrong", "Basic dXNlcjpwYXNz"] as [String?])
    func withoutTheTokenIs401(_ auth: String?) throws {
        let (s, phone) = server()
        let r = Responses()
        post(s, permission("make deploy"), auth: auth, r)
        #expect(r.got.count == 1 && r.got.first?.status == 401)
        #expect(r.json?["error"]?["message"]?.stringValue != nil)
        #expect(pending(phone).isEmpty, "nothing reached the engine")
    }

    @Test func theTokenIsCheckedWhateverTheSchemeCase() {
        let (s, _) = server()
        let token = s.env.hookToken!
        #expect(token.value.count == 43)
        #expect(token.authorizes("bearer " + token.value) && token.authorizes("Bearer  \(token.value) "))
        let wrong = String(token.value.dropLast()) + (token.value.last == "A" ? "B" : "A")
        #expect(!token.authorizes("Bearer " + wrong))
        #expect(!token.authorizes(token.value))
    }

    @Test func withNobodyToAnswerThePermissionRequestIsAnsweredAtOnce() throws {
        var o = ServerOptions()
        o.manualClock = true
        o.ephemeral = true
        let s = try RPCServer(env: ServerEnvironment(loop: EventLoop(), options: o))
        let r = Responses()
        post(s, permission("make deploy"), auth: bearer(s), r)
        #expect(r.got.count == 1 && r.got.first?.status == 200 && r.got.first?.body == "")
        let phone = s.makeInProcessClient()
        _ = phone.request("initialize", ["clientInfo": ["name": "phone"], "deviceId": "iphone"])
        #expect(pending(phone).isEmpty, "no approval nobody waits for")
    }

    @Test func otherEventsAreAnsweredAtOnceWithNoOutput() throws {
        let (s, phone) = server()
        let r = Responses()
        let h = post(s, input("PreToolUse", ["tool_name": "Bash", "tool_input": ["command": "npm test"]]), auth: bearer(s), r)
        #expect(r.got.count == 1 && r.got.first?.status == 200 && r.got.first?.body == "")
        #expect(h.isFinished)
        let session = result(phone, "session.get", ["sessionId": "h1"])?["session"]
        #expect(session?["status"] == "processing")
    }

    /// The http hook's body is byte for byte what the command hook prints:
    /// the same PermissionRequest over `agent.hook` (as `codingbridge hook`
    /// sends it) and over http, both denied by the same device.
    @Test func permissionRequestWaitsForTheDecision() throws {
        let (s, phone) = server()
        let r = Responses()
        post(s, permission("make deploy"), auth: bearer(s), r)
        #expect(r.got.isEmpty, "no answer before a decision")
        let hook = s.makeInProcessClient()
        _ = hook.request("initialize", ["clientInfo": ["name": "codingbridge hook"], "capabilities": ["notifications": false]])
        guard case .object(var params)? = JSON.parse(String(decoding: permission("make migrate"), as: UTF8.self)) else { return }
        _ = ClaudeHookExchange.prepare(&params, waitSeconds: ClaudeHookExchange.defaultWaitSeconds)
        #expect(hook.request("agent.hook", .object(params)).isEmpty)

        for rid in pending(phone) {
            #expect(result(phone, "approval.respond", ["requestId": .string(rid), "decision": "deny"])?["status"] == "accepted")
        }
        s.env.store?.flush()
        let printed = ClaudeHookExchange.output(try #require(hook.messages(hook.takeOutput()).first { $0["id"] != nil }?["result"]))
        #expect(JSON.parse(printed) == ClaudeHookAdapter.decisionOutput(.deny, by: "iphone"))
        #expect(r.got.count == 1 && r.got.first?.status == 200)
        // The command hook re-encodes what it parsed off the socket: same JSON, keys maybe reordered.
        #expect(r.json == JSON.parse(printed) && r.got.first?.body.hasSuffix("}\n") == true)
    }

    @Test func allowIsClaudeCodesDecisionJSON() throws {
        let (s, phone) = server()
        let r = Responses()
        post(s, permission("make deploy"), auth: bearer(s), r)
        let rid = try #require(pending(phone).first)
        _ = result(phone, "approval.respond", ["requestId": .string(rid), "decision": "allow"])
        s.env.store?.flush()
        let body = r.json
        #expect(body == ["hookSpecificOutput": ["hookEventName": "PermissionRequest", "decision": ["behavior": "allow"]]])
    }

    /// "Always allow" and "Deny and stop" over http: the same JSON the command hook prints.
    @Test func richerDecisionsReachTheHttpHook() throws {
        let (s, phone) = server()
        let rule: JSON = ["type": "addRules", "rules": [["toolName": "Bash", "ruleContent": "make deploy"]],
                          "behavior": "allow", "destination": "localSettings"]
        let always = Responses(), stop = Responses()
        post(s, input("PermissionRequest", ["tool_name": "Bash", "tool_input": ["command": "make deploy"],
                                            "permission_suggestions": [rule]]), auth: bearer(s), always)
        let rid = try #require(pending(phone).first)
        #expect(result(phone, "approval.list", [:])?["approvals"]?.arrayValue?.first?["permissionSuggestions"] == [rule])
        _ = result(phone, "approval.respond", ["requestId": .string(rid), "decision": "allow", "alwaysAllow": true])
        s.env.store?.flush()
        #expect(always.json == ClaudeHookAdapter.decisionOutput(.allow, by: "iphone", options: DecisionOptions(alwaysAllow: true),
                                                                permissionSuggestions: [rule]))
        #expect(always.json?["hookSpecificOutput"]?["decision"]?["updatedPermissions"] == [rule])

        post(s, permission("make migrate"), auth: bearer(s), stop)
        let rid2 = try #require(pending(phone).first)
        _ = result(phone, "approval.respond", ["requestId": .string(rid2), "decision": "deny", "message": "Not today",
                                               "interrupt": true])
        s.env.store?.flush()
        #expect(stop.json == ["hookSpecificOutput": ["hookEventName": "PermissionRequest",
                                                     "decision": ["behavior": "deny", "message": "Not today", "interrupt": true]]])
    }

    /// The HTTP client went away (Claude Code stopped waiting: the person
    /// answered in the terminal): as a closed hook socket, the approval is
    /// cancelled and nothing is sent; another request's approval stays.
    @Test func cancelBeforeTheDecisionCancelsTheApproval() throws {
        let (s, phone) = server()
        let gone = Responses(), stays = Responses()
        let h = post(s, permission("make deploy"), auth: bearer(s), gone)
        post(s, permission("make migrate"), auth: bearer(s), stays)
        let before = pending(phone)
        #expect(before.count == 2)
        h.cancel()
        s.env.store?.flush()
        for _ in 0..<3 { _ = s.env.loop.runOnce() }
        let left = result(phone, "approval.list", [:])?["approvals"]?.arrayValue ?? []
        #expect(left.count == 1 && left.first?["summary"]?.stringValue?.contains("migrate") == true)
        let history = result(phone, "session.get", ["sessionId": "h1"])?["session"]?["history"]?.arrayValue ?? []
        #expect(history.map { $0["kind"]?.stringValue } == ["cancelled"])
        #expect(gone.got.isEmpty && stays.got.isEmpty)
        h.cancel()
        #expect(pending(phone).count == 1, "a second cancel changes nothing")
    }

    @Test func theWaitFollowsTheTimeoutHeader() throws {
        let (s, phone) = server()
        let r = Responses()
        post(s, permission("make deploy"), auth: bearer(s), timeout: "5", r)
        _ = phone.request("debug.advanceClock", ["ms": 2900])
        #expect(r.got.isEmpty)
        _ = phone.request("debug.advanceClock", ["ms": 100])
        s.env.store?.flush()
        #expect(r.got.count == 1 && r.got.first?.status == 200 && r.got.first?.body == "", "expired 2 s before the wait ends")
    }

    /// The engine's clock did not reach the approval's end (here: manual),
    /// but the wait did: no output, and the approval is cancelled.
    @Test func theWaitEndsEvenWhenTheEngineClockStands() throws {
        let (s, phone) = server()
        let r = Responses()
        post(s, permission("make deploy"), auth: bearer(s), timeout: "0.05", r)
        // Unlike a serving process, nothing here keeps the loop alive; the
        // backstop's timer (unreferenced) runs only while something does.
        let alive = LoopTimer(loop: s.env.loop, everyMs: 10, keepsLoopAlive: true) {}
        defer { withExtendedLifetime(alive) {} }
        let start = s.env.loop.nowMs
        while r.got.isEmpty && s.env.loop.nowMs - start < 5000 { _ = s.env.loop.runOnce() }
        #expect(r.got.count == 1 && r.got.first?.status == 200 && r.got.first?.body == "")
        #expect(pending(phone).isEmpty)
    }

    @Test(arguments: ["{not json", "[1, 2]", "", "\"PreToolUse\"", "\u{FF}\u{FE}"])
    func aBodyThatIsNotAJSONObjectIs400(_ body: String) throws {
        let (s, _) = server()
        let r = Responses()
        post(s, Array(body.utf8), auth: bearer(s), r)
        #expect(r.got.count == 1 && r.got.first?.status == 400)
        #expect(r.json?["error"]?["message"]?.stringValue != nil)
    }

    @Test func aHookInputAgentHookRefusesIs400WithItsError() throws {
        let (s, _) = server()
        let r = Responses()
        post(s, Array(#"{"hook_event_name": "PreToolUse", "tool_name": "Bash"}"#.utf8), auth: bearer(s), r)
        #expect(r.got.first?.status == 400)
        let e = r.json?["error"]
        #expect(e?["code"] == .int(Int64(RPCError.invalidParamsCode)))
        #expect(e?["data"]?["param"] == "session_id")
    }

    @Test(arguments: ["abc", "0", "-1", "nan", "inf", "86401"])
    func aBadTimeoutIs400(_ t: String) {
        let (s, phone) = server()
        let r = Responses()
        post(s, permission("make deploy"), auth: bearer(s), timeout: t, r)
        #expect(r.got.first?.status == 400)
        #expect(pending(phone).isEmpty)
    }
}
