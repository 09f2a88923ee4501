import Testing
@testable import BridgeEngine
import BridgeCore

@Suite struct ApprovalTests {
    static func pending(background: Bool = true, settings: Settings = Settings()) -> Harness {
        var h = Harness(settings: settings, background: background)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        return h
    }

    @Test func answeredAt59_9sIsAccepted() {
        var h = Self.pending()
        h.advance(seconds: 59.9)
        let (r, fx) = h.respond("r1", .allow, device: "iphone")
        #expect(r.status == .accepted)
        #expect(r.resolution == .allow)
        #expect(fx.clears == ["approval:r1"])
        #expect(fx.badges == [0])
        #expect(fx.resolutions.map(\.1) == [.allow])
        let s = h.engine.session("s1")!
        #expect(s.status == .processing)
        #expect(s.operation == "Running tests")     // PRD Flow 2
        #expect(s.activeDevice == "iphone")
        #expect(h.engine.metrics.missedApprovals == 0)
    }

    @Test func at60sItHasTimedOut() {
        var h = Self.pending()
        let fx = h.advance(seconds: 60)
        #expect(fx.clears == ["approval:r1"])
        #expect(fx.resolutions.map(\.1) == [.timedOut])
        #expect(fx.updates.last?.message == "Approval timed out - Claude continued")
        #expect(h.engine.session("s1")!.status == .processing)
        #expect(h.engine.session("s1")!.history.last?.kind == .timedOut)
        #expect(h.engine.metrics.missedApprovals == 1)
        let (r, fx2) = h.respond("r1", .allow)
        #expect(r.status == .expired)
        #expect(fx2.isEmpty)
    }

    @Test func answerAt60sWithoutATickStillExpires() {
        // The host's timer may not have run yet: the answer must not win.
        var h = Self.pending()
        h.now += 60_000
        let (r, fx) = h.respond("r1", .allow)
        #expect(r.status == .expired)
        #expect(fx.resolutions.map(\.1) == [.timedOut])
    }

    @Test func denyThenSecondAnswerChangesNothing() {
        var h = Self.pending()
        let (r1, _) = h.respond("r1", .deny, device: "iphone", source: .notification)
        #expect(r1.status == .accepted)
        let before = h.engine.session("s1")
        let (r2, fx) = h.respond("r1", .allow, device: "ipad")
        #expect(r2.status == .alreadyResolved)
        #expect(r2.resolution == .deny)
        #expect(fx.isEmpty)
        #expect(h.engine.session("s1") == before)
        #expect(h.engine.metrics[.denialFromNotification] == 1)
        #expect(h.engine.session("s1")!.history.last?.kind == .denied)
    }

    @Test func unknownRequest() {
        var h = Self.pending()
        #expect(h.respond("nope", .allow).0.status == .unknown)
    }

    @Test func timeoutComesFromSettings() {
        var s = Settings()
        s.approvalTimeoutSeconds = 10
        var h = Self.pending(settings: s)
        #expect(h.engine.nextDeadline == h.now + 10_000)
        #expect(h.advance(seconds: 9.999).resolutions.isEmpty)
        #expect(h.advance(seconds: 0.001).resolutions.map(\.1) == [.timedOut])
    }

    @Test func queueBadgeAndNewestInActivity() {
        var h = Self.pending()
        let fx = h.agent("s1", .approvalRequest(requestId: "r2", tool: ToolUse(name: "Write", filePath: "src/a.ts"), timeoutSeconds: nil))
        #expect(fx.badges == [2])
        #expect(fx.posts.first?.badge == 2)
        #expect(h.engine.currentActivity(now: h.now)?.approval?.requestId == "r2")
        #expect(h.engine.pendingApprovals.map(\.requestId) == ["r1", "r2"])
        _ = h.respond("r2", .allow)
        #expect(h.engine.currentActivity(now: h.now)?.approval?.requestId == "r1")
        #expect(h.engine.session("s1")!.status == .awaitingApproval)
    }

    @Test func backendTimeoutAndCancel() {
        var h = Self.pending()
        var fx = h.agent("s1", .approvalTimeout(requestId: "r1"))
        #expect(fx.resolutions.map(\.1) == [.timedOut])
        h.agent("s1", .approvalRequest(requestId: "r2", tool: npmTest, timeoutSeconds: nil))
        fx = h.agent("s1", .approvalCancelled(requestId: "r2"))
        #expect(fx.resolutions.map(\.1) == [.cancelled])
        #expect(fx.clears == ["approval:r2"])
        #expect(h.respond("r2", .allow).0.status == .alreadyResolved)
        // The stale heap entry of r1 does nothing later.
        #expect(h.advance(seconds: 120).resolutions.isEmpty)
    }

    @Test func duplicateRequestIdIsIgnored() {
        var h = Self.pending()
        let fx = h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        #expect(fx.isEmpty)
        #expect(h.engine.pendingApprovals.count == 1)
    }

    @Test func completionCancelsOpenApprovals() {
        var h = Self.pending()
        let fx = h.agent("s1", .taskCompleted(summary: nil))
        #expect(fx.resolutions.map(\.1) == [.cancelled])
        #expect(fx.badges == [0])
        #expect(h.engine.session("s1")!.status == .completed)
    }

    @Test func questionAnswerOnceAndValidation() {
        var h = Harness(background: true)
        h.agent("s1", .question(questionId: "q1", questions: [
            Question(question: "Which database?", header: "DB", options: [.init(label: "Postgres"), .init(label: "SQLite")]),
            Question(question: "Which features?", header: "Features", options: [.init(label: "a"), .init(label: "b")], multiSelect: true),
        ]))
        #expect(h.engine.session("s1")!.status == .awaitingAnswer)
        func ans(_ a: [String: [String]]) -> QuestionAnswerResult {
            guard case .question(let r) = h.engine.apply(.questionAnswer(questionId: "q1", answers: a, deviceId: nil), now: h.now).reply
            else { fatalError() }
            return r
        }
        #expect(ans(["DB": ["Postgres", "SQLite"], "Features": ["a"]]).status == .invalid)
        #expect(ans(["DB": ["Postgres"]]).problem == "question 'Features' is not answered")
        #expect(ans(["Nope": ["x"]]).status == .invalid)
        #expect(ans(["DB": ["Postgres"], "Which features?": ["a", "b"]]).status == .accepted)
        #expect(ans(["DB": ["Postgres"], "Features": ["a"]]).status == .alreadyResolved)
        #expect(h.engine.session("s1")!.status == .processing)
    }

    // MARK: - Richer decisions (issue 17): Always allow, deny with a message, deny and stop

    static let addRule: JSON = ["type": "addRules", "rules": [["toolName": "Bash", "ruleContent": "npm test"]],
                                "behavior": "allow", "destination": "localSettings"]
    static let setMode: JSON = ["type": "setMode", "mode": "acceptEdits", "destination": "session"]

    static func suggested(background: Bool = true) -> Harness {
        var h = Harness(background: background)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil,
                                       permissionSuggestions: [addRule, setMode]))
        return h
    }

    static func options(_ fx: [Effect]) -> [DecisionOptions] {
        fx.compactMap { if case let .approvalResolved(_, _, _, _, o) = $0 { return o }; return nil }
    }

    @Test func theApprovalKeepsAtMost16SuggestionsOfAtMost4KB() {
        var h = Harness(background: true)
        let big: JSON = ["type": "addRules", "rules": [["toolName": "Bash", "ruleContent": .string(String(repeating: "x", count: 4100))]]]
        var sent: [JSON] = ["not an object", big]
        for i in 0..<20 { sent.append(["type": "addRules", "rules": [["toolName": "Bash", "ruleContent": .string("cmd \(i)")]]]) }
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil, permissionSuggestions: sent))
        let kept = h.engine.pendingApprovals[0].permissionSuggestions
        #expect(kept.count == ApprovalRequest.maxPermissionSuggestions)
        #expect(kept.first == sent[2] && kept.last == sent[17])
        #expect(ApprovalRequest.problem(withSuggestion: big) != nil)
        #expect(ApprovalRequest.problem(withSuggestion: "x") == "must be an object, not string")
        #expect(ApprovalRequest.problem(withSuggestion: Self.addRule) == nil)
    }

    @Test func alwaysAllowGoesWithTheDecision() {
        var h = Self.suggested()
        let t = h.engine.apply(.approvalResponse(requestId: "r1", decision: .allow, deviceId: "iphone", source: .app,
                                                 options: DecisionOptions(alwaysAllow: true)), now: h.now)
        guard case .approval(let r) = t.reply else { Issue.record("no reply"); return }
        #expect(r.status == .accepted && r.resolution == .allow)
        #expect(Self.options(t.effects) == [DecisionOptions(alwaysAllow: true)])
        #expect(h.engine.session("s1")!.history.last?.kind == .approved)
    }

    @Test func denyWithAMessageAndInterrupt() {
        var h = Self.suggested()
        let o = DecisionOptions(message: "Use the staging database, not prod", interrupt: true)
        let t = h.engine.apply(.approvalResponse(requestId: "r1", decision: .deny, deviceId: "iphone", source: .app, options: o),
                               now: h.now)
        #expect(Self.options(t.effects) == [o])
        #expect(t.effects.resolutions.map(\.1) == [.deny])
    }

    /// What does not fit the decision is dropped by the engine itself (the
    /// RPC layer refuses such calls before): alwaysAllow without suggestions
    /// or with deny, a message or interrupt with allow.
    @Test func optionsThatDoNotFitTheDecisionAreDropped() {
        var h = Self.pending() // r1 has no suggestions
        var t = h.engine.apply(.approvalResponse(requestId: "r1", decision: .allow, deviceId: nil, source: .app,
                                                 options: DecisionOptions(alwaysAllow: true, message: "m", interrupt: true)), now: h.now)
        #expect(Self.options(t.effects) == [.none])
        var g = Self.suggested()
        t = g.engine.apply(.approvalResponse(requestId: "r1", decision: .deny, deviceId: nil, source: .app,
                                             options: DecisionOptions(alwaysAllow: true)), now: g.now)
        #expect(Self.options(t.effects) == [.none])
        // Timeouts and cancels carry none.
        var k = Self.suggested()
        #expect(Self.options(k.advance(seconds: 60)) == [.none])
    }

    /// A decision made offline keeps its options through a restart (the
    /// engine snapshot) and applies them on reconnect; the suggestions survive too.
    @Test func aQueuedAlwaysAllowSurvivesARestart() {
        var h = Self.suggested()
        h.send(.connection(.disconnected))
        let q = h.engine.apply(.approvalQueued(requestId: "r1", decision: .allow, deviceId: "iphone", source: .notification,
                                               options: DecisionOptions(alwaysAllow: true)), now: h.now)
        guard case .approval(let r) = q.reply else { Issue.record("no reply"); return }
        #expect(r.status == .queued && Self.options(q.effects).isEmpty)
        #expect(h.engine.connectivity.queuedDecisions.first?.options == DecisionOptions(alwaysAllow: true))
        let snap = EngineSnapshot(sessions: h.engine.sessions.compactMap { h.engine.snapshot(session: $0.id) },
                                  global: h.engine.snapshotGlobal())
        var fresh = Engine(services: Harness.services)
        let report = fresh.restore(snap, now: h.now + 1000)
        #expect(report.queuedDecisions == 1)
        #expect(fresh.pendingApprovals.first?.permissionSuggestions == [Self.addRule, Self.setMode])
        let t = fresh.apply(.connection(.connected), now: h.now + 2000)
        #expect(t.effects.resolutions.map(\.1) == [.allow])
        #expect(Self.options(t.effects) == [DecisionOptions(alwaysAllow: true)])
    }

    @Test func aQueuedDenyKeepsItsMessage() {
        var h = Self.suggested()
        h.send(.connection(.disconnected))
        let o = DecisionOptions(message: "Not on Fridays", interrupt: true)
        _ = h.engine.apply(.approvalQueued(requestId: "r1", decision: .deny, deviceId: nil, source: .app, options: o), now: h.now)
        let snap = EngineSnapshot(sessions: h.engine.sessions.compactMap { h.engine.snapshot(session: $0.id) },
                                  global: h.engine.snapshotGlobal())
        var fresh = Engine(services: Harness.services)
        _ = fresh.restore(snap, now: h.now)
        #expect(Self.options(fresh.apply(.connection(.connected), now: h.now + 1).effects) == [o])
    }
}
