import Testing
@testable import BridgeEngine
import BridgeCore

extension Array where Element == Effect {
    var retries: [(attempt: Int, delayMs: Millis)] {
        compactMap { if case let .connectionRetry(a, d) = $0 { return (a, d) }; return nil }
    }
}

/// Connectivity (retry policy, Connection Lost timing, decisions made offline)
/// and the durable snapshot, on a manual clock.
@Suite struct ContinuityTests {
    /// Runs the clock from deadline to deadline up to `t` ms from now,
    /// collecting effects with their time (ms from the start).
    static func run(_ h: inout Harness, untilMs t: Millis) -> [(Millis, Effect)] {
        var out: [(Millis, Effect)] = []
        let start = h.now
        while let next = h.engine.nextDeadline, next - start <= t {
            h.now = max(h.now, next)
            for e in h.send(.tick) { out.append((h.now - start, e)) }
        }
        return out
    }

    @Test func retriesFollowTheBackoffSilently() {
        var h = Harness(background: false)
        let down = h.now
        let fx = h.send(.connection(.disconnected))
        #expect(fx.isEmpty) // silent while recovering
        var expectedAt: Millis = 0
        for n in 1...4 {
            let d = Engine.reconnectDelayMs(attempt: n, since: down)
            // Equal jitter: within [nominal/2, nominal].
            let nominal = Millis(Engine.reconnectBackoff.nominalDelayMs(attempt: n)!)
            #expect(d >= nominal / 2 && d <= nominal)
            expectedAt += d
            h.now = down + expectedAt - 1
            #expect(h.send(.tick).retries.isEmpty)
            h.now += 1
            let r = h.send(.tick)
            #expect(r.retries.map(\.attempt) == [n])
            #expect(r.retries.first?.delayMs == d)
            #expect(r.posts.isEmpty && r.banners.isEmpty)
        }
    }

    @Test func connectionLostAfter30sInBackgroundNot29_9() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        let down = h.now
        h.send(.connection(.disconnected))
        h.now = down + 29_900
        #expect(!h.send(.tick).posts.contains { $0.category == .connectionLost })
        h.now = down + 30_000
        let fx = h.send(.tick)
        let lost = fx.posts.filter { $0.category == .connectionLost }
        #expect(lost.count == 1)
        #expect(lost.first?.title == "Connection Lost")
        // Once per outage.
        h.now += 60_000
        #expect(!h.send(.tick).posts.contains { $0.category == .connectionLost })
        // Back: the notification is cleared, retries stop.
        let up = h.send(.connection(.connected))
        #expect(up.clears == ["connection-lost"])
        h.now += 600_000
        #expect(h.send(.tick).retries.isEmpty)
    }

    @Test func foregroundIsSilentUntilTheAttemptLimit() {
        var h = Harness(background: false)
        let down = h.now
        h.send(.connection(.failed))
        var lostAt: Millis?
        var attemptsBefore = 0
        for (t, e) in Self.run(&h, untilMs: 200_000) {
            if case .connectionRetry(let a, _) = e, lostAt == nil { attemptsBefore = a }
            if case .showBanner(let b) = e, b.id == "connection-lost" { lostAt = t }
            if case .postNotification = e { Issue.record("no push in foreground") }
        }
        #expect(lostAt != nil)
        // Told when attempt limit+1 comes due, i.e. after `limit` failed attempts.
        #expect(attemptsBefore == Engine.reconnectAttemptLimit)
        let due = (1...(Engine.reconnectAttemptLimit + 1)).reduce(Millis(0)) { $0 + Engine.reconnectDelayMs(attempt: $1, since: down) }
        #expect(lostAt == due)
    }

    @Test func enteringBackgroundAfter30sOfflineTellsAtOnce() {
        var h = Harness(background: false)
        h.send(.connection(.disconnected))
        h.advance(seconds: 45)
        let fx = h.setBackground(true)
        #expect(fx.posts.filter { $0.category == .connectionLost }.count == 1)
    }

    @Test func offlineDecisionsAreQueuedAndSentInOrderOnReconnect() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        h.agent("s2", .approvalRequest(requestId: "r2", tool: npmTest, timeoutSeconds: nil))
        h.send(.connection(.disconnected))
        let t2 = h.engine.apply(.approvalQueued(requestId: "r2", decision: .deny, deviceId: "watch", source: .app), now: h.now)
        let t1 = h.engine.apply(.approvalQueued(requestId: "r1", decision: .allow, deviceId: "phone", source: .notification), now: h.now)
        guard case .approval(let r2) = t2.reply, case .approval(let r1) = t1.reply else { Issue.record("no reply"); return }
        #expect(r1.status == .queued && r2.status == .queued)
        #expect(t1.effects.banners.first?.body.contains("will be sent") == true)
        #expect(t1.effects.resolutions.isEmpty)
        #expect(h.engine.pendingApprovals.count == 2) // not resolved until sent
        // A second tap changes nothing.
        let again = h.engine.apply(.approvalQueued(requestId: "r1", decision: .deny, deviceId: nil, source: .app), now: h.now)
        if case .approval(let r) = again.reply { #expect(r.status == .alreadyResolved && r.resolution == .allow) }
        h.advance(seconds: 10)
        let fx = h.send(.connection(.connected))
        #expect(fx.resolutions.map(\.0) == ["r2", "r1"])
        #expect(fx.resolutions.map(\.1) == [.deny, .allow])
        #expect(h.engine.pendingApprovals.isEmpty)
        #expect(h.engine.metrics[.approvalFromNotification] == 1)
        #expect(h.engine.connectivity.queuedDecisions.isEmpty)
    }

    @Test func offlineDecisionForARequestThatExpiresIsDroppedAndTheUserTold() {
        var h = Harness(background: true)
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        h.send(.connection(.disconnected))
        _ = h.engine.apply(.approvalQueued(requestId: "r1", decision: .allow, deviceId: nil, source: .app), now: h.now)
        h.advance(seconds: 59.9)
        #expect(h.engine.droppedDecisions.isEmpty)
        let fx = h.advance(seconds: 0.1)
        #expect(fx.resolutions.map(\.1) == [.timedOut])
        #expect(h.engine.droppedDecisions == ["r1"])
        let told = fx.posts.filter { $0.category == .decisionNotSent }
        #expect(told.count == 1)
        #expect(told.first?.userInfo["requestId"] == "r1")
        let up = h.send(.connection(.connected))
        #expect(up.resolutions.isEmpty)
        #expect(h.engine.droppedDecisions.isEmpty)
    }

    @Test func snapshotRoundTripRestoresAndExpiresWhatPassed() {
        var settings = Settings()
        settings.showNotificationDetails = true
        settings.locale = "de"
        var h = Harness(settings: settings, background: true)
        h.agent("s1", .taskStarted(prompt: "fix"))
        h.agent("s1", .progress(todos: [Todo(content: "a", status: .completed), Todo(content: "b", status: .in_progress)]))
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: 60))
        h.agent("s2", .approvalRequest(requestId: "r2", tool: npmTest, timeoutSeconds: 600))
        h.agent("s4", .question(questionId: "q1", questions: [Question(question: "Which?", options: [.init(label: "A")])]))
        h.send(.app(AppUpdate(notificationPermission: .denied)))
        h.agent("s3", .taskCompleted(summary: nil)) // missed: permission denied
        h.send(.connection(.disconnected))
        let snap = EngineSnapshot(sessions: h.engine.sessions.compactMap { h.engine.snapshot(session: $0.id) },
                                  global: h.engine.snapshotGlobal())

        var fresh = Engine(services: Harness.services)
        let later = h.now + 120_000 // r1 (60 s) expired while down, r2 (600 s) did not
        let report = fresh.restore(snap, now: later)
        #expect(report.sessions == 4)
        // s2 and s4 wait for the person: their agents are mid-task too.
        #expect(report.processingSessions == ["s1", "s2", "s4"])
        #expect(report.expiredApprovals == 1)
        #expect(report.pendingApprovals == 1)
        #expect(report.pendingQuestions == 1)
        #expect(fresh.settings.locale == "de" && fresh.settings.showNotificationDetails)
        #expect(fresh.session("s1")?.progress?.completed == 1)
        #expect(fresh.state.missedWhileAway == h.engine.state.missedWhileAway)
        #expect(!fresh.connectivity.connected)
        let fx = fresh.apply(.tick, now: later).effects
        #expect(fx.resolutions.map(\.0) == ["r1"])
        #expect(fx.resolutions.map(\.1) == [.timedOut])
        #expect(fresh.metrics.missedApprovals == 1)
        #expect(fresh.pendingApprovals.map(\.requestId) == ["r2"])
        // r2 still times out at its original deadline.
        let r2 = fresh.pendingApprovals[0]
        #expect(fresh.apply(.tick, now: r2.expiresAt - 1).effects.resolutions.isEmpty)
        #expect(fresh.apply(.tick, now: r2.expiresAt).effects.resolutions.map(\.1) == [.timedOut])
        // Answering the recovered question works.
        let t = fresh.apply(.questionAnswer(questionId: "q1", answers: ["Which?": ["A"]], deviceId: nil), now: r2.expiresAt)
        if case .question(let r) = t.reply { #expect(r.status == .accepted) } else { Issue.record("no question reply") }
        // Back in the foreground: one banner for what was missed before the restart.
        let fg = fresh.apply(.app(AppUpdate(phase: .foreground)), now: r2.expiresAt)
        #expect(fg.effects.banners.filter { $0.title == Strings(locale: "de")["banner.missed.title"] }.count == 1)
    }

    @Test("a snapshot that kept only the missed count (no kinds) still gets its banner, without an empty list")
    func missedCountWithoutKinds() {
        var h = Harness(background: true)
        h.send(.app(AppUpdate(notificationPermission: .denied)))
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .taskCompleted(summary: nil))
        guard case .object(var global) = h.engine.snapshotGlobal() else { Issue.record("global is not an object"); return }
        global["missedByCategory"] = nil
        var fresh = Engine(services: Harness.services)
        _ = fresh.restore(EngineSnapshot(sessions: [], global: .object(global)), now: h.now)
        let fg = fresh.apply(.app(AppUpdate(phase: .foreground)), now: h.now)
        #expect(fg.effects.banners.map(\.body) == ["1 notifications could not be shown. Turn on notifications to stay informed."])
    }

    /// A restart in the middle of an outage goes on with the same schedule:
    /// retry 4 at its planned time (or at once if that passed while down),
    /// and the attempt limit counts the attempts made before the restart.
    @Test func retryScheduleResumesAfterRestore() {
        var h = Harness(background: false)
        let down = h.now
        h.send(.connection(.disconnected))
        let before = ContinuityTests.run(&h, untilMs: Engine.reconnectDelayMs(attempt: 1, since: down)
            + Engine.reconnectDelayMs(attempt: 2, since: down) + Engine.reconnectDelayMs(attempt: 3, since: down))
        #expect(before.map(\.1).retries.map(\.attempt) == [1, 2, 3])
        let planned = h.engine.connectivity.nextRetryAt!
        let snap = EngineSnapshot(sessions: [], global: h.engine.snapshotGlobal())

        // Restarted before retry 4 was due: it comes at its planned time.
        var early = Engine(services: Harness.services)
        _ = early.restore(snap, now: planned - 500)
        #expect(early.connectivity.attempt == 3)
        #expect(early.apply(.tick, now: planned - 1).effects.retries.isEmpty)
        #expect(early.apply(.tick, now: planned).effects.retries.map(\.attempt) == [4])

        // Restarted long after: retry 4 at once, then 5, then the banner
        // when retry 6 comes due (the limit counts attempts before the restart).
        var late = Engine(services: Harness.services)
        let now = planned + 3_600_000
        _ = late.restore(snap, now: now)
        #expect(late.apply(.tick, now: now).effects.retries.map(\.attempt) == [4])
        var t = now
        var banners = 0
        var attempts: [Int] = []
        while attempts.count < 2, let next = late.nextDeadline {
            t = max(t, next)
            let fx = late.apply(.tick, now: t).effects
            attempts += fx.retries.map(\.attempt)
            banners += fx.banners.filter { $0.title == "Connection Lost" }.count
        }
        #expect(attempts == [5, 6])
        #expect(banners == 1)
    }

    /// Finished, untouched sessions are forgotten; working, waiting and the
    /// Live Activity's own session are kept however old.
    @Test func evictionForgetsOnlyFinishedUntouchedSessions() {
        var h = Harness(background: true)
        h.agent("done", .taskStarted(prompt: nil))
        h.agent("done", .taskCompleted(summary: nil))
        h.agent("failed", .taskFailed(error: "boom"))
        h.agent("working", .taskStarted(prompt: nil))
        h.agent("waiting", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: 86_400))
        h.agent("asking", .question(questionId: "q1", questions: [Question(question: "Which?", options: [.init(label: "A")])]))
        let cutoff = h.now + 1
        h.now += 10
        h.agent("recent", .taskCompleted(summary: nil))
        #expect(h.engine.evictSessions(lastActivityBefore: cutoff) == ["done", "failed"])
        #expect(h.engine.session("done") == nil)
        #expect(Set(h.engine.sessions.map(\.id)) == ["working", "waiting", "asking", "recent"])
        #expect(h.engine.evictSessions(lastActivityBefore: cutoff).isEmpty)
        // The approval of a kept session still works.
        #expect(h.respond("r1", .allow).0.status == .accepted)
    }

    /// A damaged or foreign database: every number at the int64 limits. Found
    /// by review: each of these trapped at every start (a crash loop) or on the
    /// next event; 1e12 missed approvals spun the start-up.
    @Test(arguments: [Int64.min, Int64.max, 1_000_000_000_000])
    func snapshotNumbersAtTheLimitsRestoreWithoutTrapping(_ v: Int64) {
        var h = Harness(background: true)
        h.send(.app(AppUpdate(notificationPermission: .denied)))
        h.send(.connection(.failed))
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        func extreme(_ j: JSON, _ keep: Set<String> = ["v", "run"]) -> JSON {
            switch j {
            case .int: return .int(v)
            case .object(let o): return .object(Dictionary(uniqueKeysWithValues: o.map { ($0.key, keep.contains($0.key) ? $0.value : extreme($0.value)) }))
            case .array(let a): return .array(a.map { extreme($0) })
            default: return j
            }
        }
        let snap = EngineSnapshot(sessions: h.engine.sessions.compactMap { h.engine.snapshot(session: $0.id) }.map { extreme($0) },
                                  global: extreme(h.engine.snapshotGlobal()))
        var e = Engine(services: Harness.services)
        let report = e.restore(snap, now: h.now)
        #expect(report.sessions == 1)
        for event: EngineEvent in [.tick, .app(AppUpdate(phase: .foreground)), .app(AppUpdate(phase: .background)),
                                   .agent(AgentEvent(sessionId: "s1", kind: .approvalRequest(requestId: "r2", tool: npmTest,
                                                                                          timeoutSeconds: nil))),
                                   .connection(.failed)] {
            _ = e.apply(event, now: h.now + 60_000)
        }
        _ = e.currentActivity(now: h.now)
        #expect(e.metrics.missedApprovals <= 1 << 53 && e.metrics.missedApprovals >= 0)
        #expect(e.sessions.allSatisfy { ($0.startedAt ?? 0) >= 0 })
    }

    @Test func unreadableSessionDocumentsAreSkippedAndCounted() {
        var e = Engine(services: Harness.services)
        let r = e.restore(EngineSnapshot(sessions: [["id": 5], ["id": "ok", "lastActivityAt": 1]], global: nil), now: 10)
        #expect(r.sessions == 1)
        #expect(r.unreadable == 1)
    }

    @Test func permissionDeniedBannerSummarisesOnce() {
        var h = Harness(background: true)
        h.send(.app(AppUpdate(notificationPermission: .denied)))
        h.agent("s1", .taskStarted(prompt: nil))
        let a = h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        let b = h.agent("s1", .taskCompleted(summary: nil))
        #expect(a.posts.isEmpty && b.posts.isEmpty)
        let fg = h.setBackground(false)
        let missed = fg.banners.filter { $0.title == "While you were away" }
        #expect(missed.count == 1)
        #expect(missed.first?.body.hasPrefix("2 notifications could not be shown: Approval Needed (1), Task Complete (1).") == true)
        _ = h.setBackground(true)
        #expect(h.setBackground(false).banners.filter { $0.title == "While you were away" }.isEmpty)
    }
}
