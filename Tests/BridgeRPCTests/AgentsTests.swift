import Testing
@testable import BridgeRPC
import BridgeCore
import BridgeEngine
#if canImport(Glibc)
import Glibc
#endif

/// The agent adapters as pure mappings (raw object -> native engine events),
/// over the same case files the e2e tests send to the server
/// (Tests/e2e/agents/*.json), plus the pieces with rules of their own.

private let casesDir: String = {
    let file = "\(#filePath)"
    let dir = file[..<file.lastIndex(of: "/")!]           // Tests/BridgeRPCTests
    let tests = dir[..<dir.lastIndex(of: "/")!]           // Tests
    return tests + "/e2e/agents"
}()

private func readFile(_ path: String) -> String? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n <= 0 { break }
        out += buf[0..<n]
    }
    return String(decoding: out, as: UTF8.self)
}

private func caseFiles() -> [String] {
    guard let d = opendir(casesDir) else { return [] }
    defer { closedir(d) }
    var names: [String] = []
    while let e = readdir(d) {
        let name = withUnsafePointer(to: e.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
        if name.hasSuffix(".json") { names.append(String(name.dropLast(5))) }
    }
    return names.sorted()
}

private let services = EngineServices(redact: { Redactor.builtIn.redacted($0) },
                                      formatElapsed: { ElapsedFormatter.english.string(seconds: Double($0)) })

/// Maps one raw object with the method's adapter.
private func map(_ method: String, _ raw: JSON?, _ engine: Engine, _ ids: inout AgentIdSource) throws -> AgentMapping {
    switch method {
    case "agent.hook": return try ClaudeHookAdapter.map(raw, engine: engine, ids: &ids)
    case "agent.streamJson": return try StreamJSONAdapter.map(raw, engine: engine, ids: &ids)
    case "agent.claudecodeui": return try ClaudeCodeUIAdapter.map(raw, engine: engine, ids: &ids)
    default: fatalError("unknown method \(method)")
    }
}

private func apply(_ m: AgentMapping, to engine: inout Engine, at now: Millis) {
    for e in m.events { _ = engine.apply(e, now: now) }
}

@Suite struct AgentCaseTests {
    @Test func theCaseFolderIsFound() {
        #expect(caseFiles().count >= 50, "cases under \(casesDir)")
    }

    @Test(arguments: caseFiles())
    func mapping(_ name: String) throws {
        let text = try #require(readFile("\(casesDir)/\(name).json"))
        let c = try #require(JSON.parse(text))
        let method = try #require(c["method"]?.stringValue)
        let expect = try #require(c["expect"])
        var engine = Engine(services: services)
        var ids = AgentIdSource(prefix: "t")
        let now: Millis = 1_000_000
        for b in c["before"]?.arrayValue ?? [] {
            let m = try map(try #require(b["method"]?.stringValue), b["params"], engine, &ids)
            apply(m, to: &engine, at: now)
        }
        if let err = expect["error"] {
            do {
                _ = try map(method, c["input"], engine, &ids)
                Issue.record("\(name): expected an error")
            } catch let e as RPCError {
                #expect(e.code == Int(err["code"]?.intValue ?? 0))
                #expect(e.data?["param"] == err["param"], "\(e)")
                if let got = err["got"] { #expect(e.data?["got"] == got, "\(e)") }
            }
            return
        }
        let m = try map(method, c["input"], engine, &ids)
        let events = expect["events"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(m.eventNames == events, "\(name): \(m.eventNames) \(m.ignored)")
        #expect((m.events.isEmpty ? "ignored" : "applied") == expect["status"]?.stringValue)
        if m.events.isEmpty { #expect(!m.ignored.isEmpty, "an ignored message says why") }
        if let part = expect["ignoredContains"]?.stringValue {
            #expect(m.ignored.contains { $0.contains(part) }, "\(m.ignored)")
        }
        apply(m, to: &engine, at: now + 1)
        if expect["respond"] != nil {
            // The approval is pending until someone answers.
            let rid = try #require(m.approvalRequestId)
            #expect(engine.pendingApprovals.map(\.requestId) == [rid])
        } else if let st = expect["sessionStatus"], st != .null, let sid = m.sessionId {
            #expect(engine.session(sid)?.status.rawValue == st.stringValue, "\(name)")
        }
    }
}

@Suite struct AgentMappingTests {
    @Test func answersFromToolResultText() {
        let t = #"User has answered your questions: "Which DB?"="SQLite", "Scope"="tests, docs". You can now continue."#
        #expect(ToolCalls.answers(fromText: t) == ["Which DB?": ["SQLite"], "Scope": ["tests, docs"]])
        #expect(ToolCalls.answers(fromText: "no answers here").isEmpty)
        #expect(ToolCalls.answers(fromText: #""dangling"=""#).isEmpty)
        #expect(ToolCalls.answers(fromText: #""Größe?"="Groß""#) == ["Größe?": ["Groß"]])
    }

    @Test func answersFromStructuredResponse() {
        let v: JSON = ["answers": ["Q1": "A", "Q2": ["x", "y"]]]
        #expect(ToolCalls.answers(from: v) == ["Q1": ["A"], "Q2": ["x", "y"]])
        let blocks: JSON = [["type": "text", "text": #""Q1"="B""#]]
        #expect(ToolCalls.answers(from: blocks) == ["Q1": ["B"]])
    }

    @Test func decisionOutputIsClaudeCodesFormat() {
        let allow = ClaudeHookAdapter.decisionOutput(.allow, by: "iphone")
        #expect(allow == ["hookSpecificOutput": ["hookEventName": "PermissionRequest", "decision": ["behavior": "allow"]]])
        let deny = ClaudeHookAdapter.decisionOutput(.deny, by: nil)
        #expect(deny?["hookSpecificOutput"]?["decision"]?["behavior"] == "deny")
        #expect(deny?["hookSpecificOutput"]?["decision"]?["message"]?.stringValue?.isEmpty == false)
        // Timeout and cancellation print nothing: Claude Code asks in its own prompt.
        #expect(ClaudeHookAdapter.decisionOutput(.timedOut, by: nil) == nil)
        #expect(ClaudeHookAdapter.decisionOutput(.cancelled, by: nil) == nil)
        #expect(ClaudeHookAdapter.decisionOutput(nil, by: nil) == nil)
    }

    @Test func richerDecisionsInClaudeCodesFormat() {
        let rule: JSON = ["type": "addRules", "rules": [["toolName": "Bash", "ruleContent": "npm test"]],
                          "behavior": "allow", "destination": "localSettings"]
        let always = ClaudeHookAdapter.decisionOutput(.allow, by: "iphone", options: DecisionOptions(alwaysAllow: true),
                                                      permissionSuggestions: [rule])
        #expect(always == ["hookSpecificOutput": ["hookEventName": "PermissionRequest",
                                                  "decision": ["behavior": "allow", "updatedPermissions": [rule]]]])
        // Without suggestions there is nothing to apply: a plain allow.
        #expect(ClaudeHookAdapter.decisionOutput(.allow, by: nil, options: DecisionOptions(alwaysAllow: true))
                == ClaudeHookAdapter.decisionOutput(.allow, by: nil))
        let stop = ClaudeHookAdapter.decisionOutput(.deny, by: "iphone", options: DecisionOptions(message: "Use staging", interrupt: true))
        #expect(stop == ["hookSpecificOutput": ["hookEventName": "PermissionRequest",
                                                "decision": ["behavior": "deny", "message": "Use staging", "interrupt": true]]])
        let plain = ClaudeHookAdapter.decisionOutput(.deny, by: "iphone", options: DecisionOptions(interrupt: false))
        #expect(plain?["hookSpecificOutput"]?["decision"]?["interrupt"] == nil)
        #expect(plain?["hookSpecificOutput"]?["decision"]?["message"] == "Denied by the user from CodingBridge (iphone).")
    }

    @Test func permissionSuggestionsAreKeptLeniently() throws {
        var ids = AgentIdSource(prefix: "t")
        let engine = Engine(services: services)
        func request(_ suggestions: JSON) throws -> AgentMapping {
            try ClaudeHookAdapter.map(["session_id": "s1", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
                                       "tool_input": ["command": "npm test"], "permission_suggestions": suggestions],
                                      engine: engine, ids: &ids)
        }
        func kept(_ m: AgentMapping) -> [JSON]? {
            guard case .agent(let a)? = m.events.first, case let .approvalRequest(_, _, _, s) = a.kind else { return nil }
            return s
        }
        let rule: JSON = ["type": "setMode", "mode": "acceptEdits", "destination": "session"]
        let many = try request(.array(["text", .object(["big": .string(String(repeating: "y", count: 5000))])]
                                      + Array(repeating: rule, count: 17)))
        #expect(kept(many)?.count == 16)
        #expect(many.ignored.count == 3, "\(many.ignored)")
        #expect(many.ignored.contains { $0.hasPrefix("permission_suggestions[0] must be an object") })
        #expect(many.unusedFields.isEmpty)
        #expect(kept(try request([rule])) == [rule])
        // Not an array: the sender's bug, named.
        #expect(throws: RPCError.self) { _ = try request(["type": "setMode"]) }
        do { _ = try request("setMode") } catch let e as RPCError { #expect(e.data?["param"] == "permission_suggestions") }
    }

    @Test func generatedRequestIdsAreUnique() {
        var a = AgentIdSource(), b = AgentIdSource()
        let ids = (0..<100).map { _ in a.next("hook") } + (0..<100).map { _ in b.next("hook") }
        #expect(Set(ids).count == 200)
    }

    @Test func everyAdapterRejectsANonObject() {
        var ids = AgentIdSource()
        let engine = Engine(services: services)
        for m in ["agent.hook", "agent.streamJson", "agent.claudecodeui"] {
            for raw: JSON? in [nil, "text", [1, 2], 3] {
                #expect(throws: RPCError.self) { _ = try map(m, raw, engine, &ids) }
            }
        }
    }

    @Test func toolInputIsReadLeniently() {
        let t = ToolCalls.toolUse(name: "Bash", input: ["command": ["not": "a string"], "description": "Run it"])
        #expect(t.command == nil && t.description == "Run it")
        let e = ToolCalls.toolUse(name: "Edit", input: ["file_path": "/a/b.swift"])
        #expect(e.filePath == "/a/b.swift" && OperationText.key(for: e) == "operation.editing")
    }
}

/// The async plumbing: a PermissionRequest's reply waits for approval.respond
/// from another client, through the real dispatcher.
@Suite struct AgentHookServerTests {
    private func server() -> (RPCServer, InProcessClient, InProcessClient) {
        var o = ServerOptions()
        o.manualClock = true
        o.ephemeral = true
        // In-process clients share the process's lifecycle: only the first
        // completes initialize, so the "phone" here is never a client that
        // takes notifications. The approvals wait on request.
        o.alwaysWaitForApproval = true
        let env = ServerEnvironment(loop: EventLoop(), options: o)
        let s = try! RPCServer(env: env)
        let hook = s.makeInProcessClient(), phone = s.makeInProcessClient()
        _ = hook.request("initialize", ["clientInfo": ["name": "hook"]])
        return (s, hook, phone)
    }

    /// AskUserQuestion's PreToolUse waits for question.answer, then allows
    /// with the answers (by question text) in updatedInput.
    @Test func aQuestionAnsweredOnThePhoneIsTheToolsInput() throws {
        let (_, hook, phone) = server()
        let ask: JSON = ["questions": [["question": "Which CI provider?", "header": "CI", "multiSelect": false,
                                        "options": [["label": "GitHub Actions"], ["label": "GitLab CI"]]]]]
        let call: JSON = ["jsonrpc": "2.0", "id": 31, "method": "agent.hook",
                          "params": ["session_id": "s31", "hook_event_name": "PreToolUse", "tool_name": "AskUserQuestion",
                                     "tool_use_id": "toolu_31", "tool_input": ask]]
        #expect(replies(hook.send(call.serialized() + "\n")).isEmpty, "it waits for the answer")
        let r = phone.request("question.answer", ["questionId": "toolu_31", "answers": ["CI": ["GitLab CI"]], "deviceId": "iphone"])
        #expect(r.first { $0["id"] != nil }?["result"]?["status"] == "accepted")
        let answer = try #require(replies(hook.takeOutput()).first?["result"])
        #expect(answer["decision"] == "answered" && answer["by"] == "iphone")
        var updated = ask.objectValue!
        updated["answers"] = ["Which CI provider?": "GitLab CI"]
        #expect(answer["hookOutput"] == ["hookSpecificOutput": ["hookEventName": "PreToolUse", "permissionDecision": "allow",
                                                                 "updatedInput": .object(updated)]])
    }

    /// Nobody but the hook itself is connected (and no push registration):
    /// the PermissionRequest is answered at once with no decision and no
    /// approval is left pending; --always-wait-for-approval waits anyway.
    @Test func nobodyToAnswerAnswersAtOnce() throws {
        for always in [false, true] {
            var o = ServerOptions()
            o.manualClock = true
            o.ephemeral = true
            o.alwaysWaitForApproval = always
            let s = try RPCServer(env: ServerEnvironment(loop: EventLoop(), options: o))
            let hook = s.makeInProcessClient()
            _ = hook.request("initialize", ["clientInfo": ["name": "hook"]])
            // Another in-process client (it shares the hook's lifecycle, so it
            // is no client that takes notifications): it only looks.
            let mute = s.makeInProcessClient()
            let call: JSON = ["jsonrpc": "2.0", "id": 5, "method": "agent.hook",
                              "params": ["session_id": "s5", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
                                         "tool_input": ["command": "make deploy"]]]
            let got = replies(hook.send(call.serialized() + "\n"))
            let pending = mute.request("approval.list", [:]).first { $0["id"] != nil }?["result"]?["approvals"]?.arrayValue
            if always {
                #expect(got.isEmpty, "it waits")
                #expect(pending?.count == 1)
            } else {
                let r = try #require(got.first?["result"])
                #expect(r["decision"] == "noAnswerer" && r["hookOutput"] == .null && r["requestId"] == nil)
                #expect(r["ignored"]?.arrayValue?.contains("nobody can answer: no client connected and no push registration") == true)
                #expect(pending?.isEmpty == true, "no phantom approval")
            }
        }
    }

    private func replies(_ text: String) -> [JSON] {
        text.split(separator: "\n").compactMap { JSON.parse(String($0)) }.filter { $0["id"] != nil }
    }

    @Test func decisionArrivesWhenAnotherClientAnswers() throws {
        let (_, hook, phone) = server()
        let call: JSON = ["jsonrpc": "2.0", "id": 7, "method": "agent.hook",
                          "params": ["session_id": "s1", "cwd": "/w/p", "hook_event_name": "PermissionRequest",
                                     "tool_name": "Bash", "tool_input": ["command": "make deploy"]]]
        #expect(replies(hook.send(call.serialized() + "\n")).isEmpty, "no reply before a decision")
        let list = phone.request("approval.list", [:]).first { $0["id"] != nil }
        let rid = try #require(list?["result"]?["approvals"]?.arrayValue?.first?["requestId"]?.stringValue)
        let r = phone.request("approval.respond", ["requestId": .string(rid), "decision": "allow", "deviceId": "iphone"])
        #expect(r.first { $0["id"] != nil }?["result"]?["status"] == "accepted")
        let answer = try #require(replies(hook.takeOutput()).first)
        #expect(answer["id"] == 7)
        #expect(answer["result"]?["decision"] == "allow")
        #expect(answer["result"]?["by"] == "iphone")
        #expect(answer["result"]?["hookOutput"] == ClaudeHookAdapter.decisionOutput(.allow, by: "iphone"))
    }

    private static let rule: JSON = ["type": "addRules", "rules": [["toolName": "Bash", "ruleContent": "make deploy"]],
                                     "behavior": "allow", "destination": "localSettings"]

    /// A PermissionRequest with suggestions waiting on `hook`; its request id.
    private func ask(_ hook: InProcessClient, _ phone: InProcessClient, id: Int, suggestions: [JSON]) throws -> String {
        var params: [String: JSON] = ["session_id": "s9", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
                                      "tool_input": ["command": .string("make deploy \(id)")]]
        if !suggestions.isEmpty { params["permission_suggestions"] = .array(suggestions) }
        let call: JSON = ["jsonrpc": "2.0", "id": .int(Int64(id)), "method": "agent.hook", "params": .object(params)]
        #expect(replies(hook.send(call.serialized() + "\n")).isEmpty)
        let list = phone.request("approval.list", [:]).first { $0["id"] != nil }
        let a = try #require(list?["result"]?["approvals"]?.arrayValue?.first { $0["summary"] == .string("make deploy \(id)") })
        #expect(a["permissionSuggestions"] == .array(suggestions))
        return try #require(a["requestId"]?.stringValue)
    }

    private func respond(_ phone: InProcessClient, _ params: [String: JSON]) -> JSON? {
        phone.request("approval.respond", .object(params)).first { $0["id"] != nil }
    }

    @Test func alwaysAllowHandsTheSuggestionsBack() throws {
        let (_, hook, phone) = server()
        let rid = try ask(hook, phone, id: 21, suggestions: [Self.rule])
        let r = respond(phone, ["requestId": .string(rid), "decision": "allow", "alwaysAllow": true, "deviceId": "iphone"])
        #expect(r?["result"]?["status"] == "accepted")
        let answer = try #require(replies(hook.takeOutput()).first)
        #expect(answer["result"]?["decision"] == "allow")
        #expect(answer["result"]?["hookOutput"]?["hookSpecificOutput"]?["decision"]
                == ["behavior": "allow", "updatedPermissions": [Self.rule]])
    }

    @Test func denyWithAMessageAndStop() throws {
        let (_, hook, phone) = server()
        let rid = try ask(hook, phone, id: 22, suggestions: [])
        let r = respond(phone, ["requestId": .string(rid), "decision": "deny", "message": "Run it on staging first",
                                "interrupt": true])
        #expect(r?["result"]?["status"] == "accepted")
        let answer = try #require(replies(hook.takeOutput()).first)
        #expect(answer["result"]?["hookOutput"]?["hookSpecificOutput"]?["decision"]
                == ["behavior": "deny", "message": "Run it on staging first", "interrupt": true])
    }

    @Test func combinationsThatDoNotFitAre32602() throws {
        let (_, hook, phone) = server()
        let with = try ask(hook, phone, id: 23, suggestions: [Self.rule])
        let without = try ask(hook, phone, id: 24, suggestions: [])
        let bad: [([String: JSON], String)] = [
            (["requestId": .string(with), "decision": "deny", "alwaysAllow": true], "alwaysAllow"),
            (["requestId": .string(with), "decision": "allow", "message": "why"], "message"),
            (["requestId": .string(with), "decision": "allow", "interrupt": true], "interrupt"),
            (["requestId": .string(without), "decision": "allow", "alwaysAllow": true], "alwaysAllow"),
            (["requestId": .string(with), "decision": "deny", "message": ""], "message"),
            (["requestId": .string(with), "decision": "deny", "message": .string(String(repeating: "m", count: 1001))], "message"),
            (["requestId": .string(with), "decision": "allow", "alwaysAllow": "yes"], "alwaysAllow"),
        ]
        for (params, param) in bad {
            let e = respond(phone, params)?["error"]
            #expect(e?["code"] == .int(Int64(RPCError.invalidParamsCode)), "\(params)")
            #expect(e?["data"]?["param"] == .string(param), "\(params): \(e ?? .null)")
            #expect(e?["data"]?["expected"] != nil && e?["data"]?["got"] != nil)
        }
        #expect(replies(hook.takeOutput()).isEmpty, "nothing was decided")
        // false is the same as absent; a message of exactly 1000 characters is fine.
        let ok = respond(phone, ["requestId": .string(without), "decision": "deny", "alwaysAllow": false,
                                 "message": .string(String(repeating: "m", count: 1000))])
        #expect(ok?["result"]?["status"] == "accepted")
    }

    @Test func timeoutAnswersWithNoOutput() throws {
        let (_, hook, _) = server()
        let call: JSON = ["jsonrpc": "2.0", "id": 8, "method": "agent.hook",
                          "params": ["session_id": "s2", "hook_event_name": "PermissionRequest", "tool_name": "Write",
                                     "tool_input": ["file_path": "/w/x"], "timeoutSeconds": 5]]
        #expect(replies(hook.send(call.serialized() + "\n")).isEmpty)
        let out = hook.request("debug.advanceClock", ["ms": 5000]) + replies(hook.takeOutput())
        let answer = try #require(out.first { $0["id"] == 8 })
        #expect(answer["result"]?["decision"] == "timeout")
        #expect(answer["result"]?["hookOutput"] == .null)
    }

    /// Claude Code killed the hook (the person answered in the terminal): its
    /// connection closes, its approval is cancelled; another hook's stays.
    @Test func closedHookConnectionCancelsOnlyItsApproval() throws {
        let (s, hook, phone) = server()
        // Resolutions as the session's history records them (id, kind).
        var resolved: [(String, String)] {
            let r = phone.request("session.get", ["sessionId": "s3"]).first { $0["id"] != nil }
            return (r?["result"]?["session"]?["history"]?.arrayValue ?? []).map { ($0["id"]!.stringValue!, $0["kind"]!.stringValue!) }
        }
        let other = s.makeInProcessClient()
        func ask(_ c: InProcessClient, _ id: Int, _ command: String) {
            let call: JSON = ["jsonrpc": "2.0", "id": .int(Int64(id)), "method": "agent.hook",
                              "params": ["session_id": "s3", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
                                         "tool_input": ["command": .string(command)]]]
            #expect(replies(c.send(call.serialized() + "\n")).isEmpty)
        }
        func pending() -> [String: String] {
            let list = phone.request("approval.list", [:]).first { $0["id"] != nil }
            var m: [String: String] = [:]
            for a in list?["result"]?["approvals"]?.arrayValue ?? [] { m[a["summary"]!.stringValue!] = a["requestId"]!.stringValue! }
            return m
        }
        ask(hook, 1, "make deploy")
        ask(other, 2, "make migrate")
        let before = pending()
        #expect(before.count == 2)
        // A client that never asked for a permission goes away: nothing changes.
        do { let idle = s.makeInProcessClient(); _ = idle.request("ping") }
        for _ in 0..<3 { _ = s.env.loop.runOnce() }
        #expect(pending() == before && resolved.isEmpty)

        hook.sendEOF()
        for _ in 0..<3 { _ = s.env.loop.runOnce() }
        let rid = try #require(before["make deploy"])
        #expect(pending() == ["make migrate": before["make migrate"]!])
        #expect(resolved.count == 1 && resolved.first?.0 == rid && resolved.first?.1 == "cancelled")
        // Once resolved, the close of a connection whose approval was answered changes nothing.
        let r = phone.request("approval.respond", ["requestId": .string(before["make migrate"]!), "decision": "deny"])
        #expect(r.first { $0["id"] != nil }?["result"]?["status"] == "accepted")
        #expect(replies(other.takeOutput()).first?["result"]?["decision"] == "deny")
        other.sendEOF()
        for _ in 0..<3 { _ = s.env.loop.runOnce() }
        #expect(resolved.count == 2 && resolved.last?.1 == "denied")
    }
}
