import Testing
@testable import BridgeCore
@testable import BridgeEngine
@testable import BridgeRPC

/// EDGE-CASES "Content Filtering for Lock Screen": every field of every
/// effect, found by reflection (a field added later is covered without
/// touching this test), has been through `LockScreenGate`.
@Suite struct LockScreenGateTests {
    static let token = "ghp_" + "R8s2Kq9VwX4mLt7Zp1Nc6Hy3Jd5Fb0Ge8Ua2"
    static let pathMarker = "/home/alice/clients/acme-secret-project"
    static let todoMarker = "Rotating key"
    static let services = EngineServices(redact: { Redactor.builtIn.redacted($0) },
                                         formatElapsed: { ElapsedFormatter.english.string(seconds: Double($0)) })
    /// Long, odd and hostile text: zalgo, joined emoji, quotes, controls.
    static let noise = String(repeating: "e\u{301}\u{302}\u{303}👩‍👩‍👧‍👦\"\\\u{1}", count: 700)

    /// Every event kind that produces text for a person, in background and
    /// foreground, for a session with the longest id the contract allows.
    static func effects(details: Bool) -> [Effect] {
        var s = Settings()
        s.showNotificationDetails = details
        var engine = Engine(services: services, settings: s)
        var now: Millis = 1_000_000
        var out: [Effect] = []
        func send(_ e: EngineEvent) { out += engine.apply(e, now: now).effects; now += 1000 }
        let sid = String(repeating: "é", count: 128)
        let secretTool = ToolUse(name: "Bash", command: "curl -H 'Authorization: token \(token)' \(noise)")
        func agent(_ k: AgentEvent.Kind) {
            send(.agent(AgentEvent(sessionId: sid, kind: k, projectName: "acme \(token) \(noise)",
                                   projectPath: "\(pathMarker)/\(token)/\(noise)")))
        }
        for phase in [AppState.Phase.background, .foreground] {
            send(.app(AppUpdate(phase: phase)))
            agent(.taskStarted(prompt: "deploy with \(token)"))
            agent(.toolUse(secretTool))
            agent(.progress(todos: [Todo(content: "\(todoMarker) \(token)", status: .in_progress,
                                         activeForm: "\(todoMarker) \(token) \(noise)"),
                                    Todo(content: "done", status: .completed)]))
            agent(.approvalRequest(requestId: "r-\(phase)", tool: secretTool, timeoutSeconds: 30))
            agent(.question(questionId: "q-\(phase)", questions: [
                Question(question: "Use \(token)? \(noise)", header: "key \(token)",
                         options: [.init(label: "yes \(token)"), .init(label: "no")])]))
            send(.approvalResponse(requestId: "r-\(phase)", decision: .allow, deviceId: "phone", source: .app))
            send(.questionAnswer(questionId: "q-\(phase)", answers: ["key \(token)": ["no"]], deviceId: "phone"))
            agent(.taskFailed(error: "push rejected: \(token) \(noise)"))
            agent(.taskStarted(prompt: nil))
            now += Engine.longTaskThreshold
            send(.tick)
            agent(.taskCompleted(summary: "rotated \(token) \(noise)"))
        }
        return out
    }

    /// Every String inside `value`, with where it sits.
    static func strings(_ value: Any, _ path: String, into out: inout [(path: String, text: String)]) {
        if let s = value as? String { return out.append((path, s)) }
        for c in Mirror(reflecting: value).children { strings(c.value, "\(path).\(c.label ?? "·")", into: &out) }
    }

    @Test(arguments: [false, true])
    func everyFieldOfEveryEffectWentThroughTheGate(details: Bool) {
        let gate = LockScreenGate(showDetails: details, redact: Self.services.redact)
        let effects = Self.effects(details: details)
        #expect(effects.count > 40)
        var seen = Set<String>()
        for e in effects {
            // Passed once already: a second pass changes nothing.
            #expect(gate.pass(e) == e, "\(e.method) not gated")
            var fields: [(path: String, text: String)] = []
            Self.strings(e, e.method, into: &fields)
            for f in fields {
                seen.insert(f.path)
                #expect(!f.text.contains(Self.token), "secret in \(f.path)")
                #expect(f.text.count <= LockScreenGate.maxBlock, "\(f.path) has \(f.text.count) characters")
                #expect(!f.text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "control character in \(f.path)")
                let lockScreen = e.method == "notification.post" || e.method.hasPrefix("activity.")
                if lockScreen && !details {
                    #expect(!f.text.contains(Self.pathMarker), "path in \(f.path) with details off")
                    #expect(!f.text.contains(Self.todoMarker), "todo text in \(f.path) with details off")
                }
            }
            #expect(Self.encodedBytes(e) <= LockScreenGate.maxPayloadBytes, "\(e.method) over 4 KB")
        }
        // The scenario reaches the fields that carry a person's text.
        for path in ["notification.post.postNotification.body", "banner.show.showBanner.body",
                     "activity.update.updateActivity.rendered.lockScreen", "activity.end.endActivity.message"] {
            #expect(seen.contains(path), "scenario never produced \(path)")
        }
    }

    static func encodedBytes(_ e: Effect) -> Int {
        switch e {
        case .postNotification(let n): return EngineCoding.notification(n).serialized().utf8.count
        case .startActivity(let c), .updateActivity(let c), .endActivity(let c):
            return EngineCoding.activity(c).serialized().utf8.count
        default: return 0
        }
    }

    @Test func detailsOnKeepThePathAndTodoRedacted() {
        let updates = Self.effects(details: true).compactMap { e -> ActivityContent? in
            if case .updateActivity(let c) = e { return c }
            return nil
        }
        #expect(updates.contains { $0.projectPath?.hasPrefix(Self.pathMarker) == true })
        #expect(updates.contains { $0.progress?.current?.hasPrefix(Self.todoMarker) == true })
    }

    @Test func truncationCountsCharactersAndBytes() {
        #expect(Privacy.truncate("short", to: 200) == "short")
        let zalgo = "a" + String(repeating: "\u{301}", count: 5000)  // one character, 10 KB
        #expect(Privacy.truncate(zalgo, to: 200) == "…")
        let family = String(repeating: "👩‍👩‍👧‍👦", count: 100)  // 25 bytes a character
        let cut = Privacy.truncate(family, to: 200)
        #expect(cut.utf8.count <= 800 && cut.hasSuffix("…") && cut.dropLast().allSatisfy { $0 == "👩‍👩‍👧‍👦" })
    }
}
