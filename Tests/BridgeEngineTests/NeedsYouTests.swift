import Testing
@testable import BridgeEngine
import BridgeCore

/// NeedsYou.swift: the agent waits for the person in its own terminal.
@Suite struct NeedsYouTests {
    static let permissionPrompt = AgentEvent.Kind.needsInput(NeedsInput(reason: .permissionPrompt, message: "Claude needs your permission to use Bash"))

    @Test func aPermissionPromptAwayPostsOneNotificationAndTheStatusSaysSo() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        let fx = h.agent("s1", Self.permissionPrompt)
        let s = h.engine.session("s1")!
        #expect(s.status == .awaitingInput)
        #expect(s.message == "Waiting for your permission in the terminal")
        #expect(fx.posts.map(\.category) == [.needsInput])
        #expect(fx.posts.first?.title == "Claude needs your attention")
        #expect(fx.posts.first?.body == "Claude is waiting for you in the terminal") // details off
        #expect(fx.updates.last?.status == .awaitingInput)
        #expect(h.agent("s1", Self.permissionPrompt).posts.isEmpty) // the same wait again
    }

    @Test func theNextEventEndsTheWaitAndClearsItsNotification() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        let id = h.agent("s1", Self.permissionPrompt).posts.first!.id
        let fx = h.agent("s1", .toolUse(npmTest))
        #expect(fx.clears == [id])
        #expect(h.engine.session("s1")!.status == .processing)
        #expect(h.engine.session("s1")!.message == nil)
    }

    @Test func inTheForegroundNothingIsPosted() {
        var h = Harness(background: false)
        h.agent("s1", .taskStarted(prompt: nil))
        #expect(h.agent("s1", Self.permissionPrompt).posts.isEmpty)
        #expect(h.engine.session("s1")!.status == .awaitingInput)
    }

    @Test func theNextPromptAfterARefusalInTheTerminalIsSilent() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        h.agent("s1", .approvalCancelled(requestId: "r1"))
        let fx = h.agent("s1", .needsInput(NeedsInput(reason: .nextPrompt)))
        #expect(fx.posts.isEmpty)
        #expect(h.engine.session("s1")!.status == .awaitingInput)
        #expect(h.engine.session("s1")!.message == "Waiting for your prompt")
    }

    @Test func aPromptBesideOurOpenRequestWaitsOnlyIfOursTimesOut() {
        var h = ApprovalTests.pending()
        let fx = h.agent("s1", Self.permissionPrompt)
        #expect(fx.posts.isEmpty)
        #expect(h.engine.session("s1")!.status == .awaitingApproval)
        h.advance(seconds: 60)
        #expect(h.engine.session("s1")!.status == .awaitingInput)

        var answered = ApprovalTests.pending()
        answered.agent("s1", Self.permissionPrompt)
        answered.respond("r1", .allow, device: "iphone")
        #expect(answered.engine.session("s1")!.status == .processing)
    }

    @Test func anIdlePromptAfterCompletionChangesNothing() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .taskCompleted(summary: "Done"))
        let fx = h.agent("s1", .needsInput(NeedsInput(reason: .idlePrompt)))
        #expect(fx.posts.isEmpty)
        #expect(h.engine.session("s1")!.status == .completed)
    }

    @Test func theWaitSurvivesARestart() throws {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .progress(todos: [Todo(content: "Run tests", status: .pending, id: "1")]))
        let id = h.agent("s1", Self.permissionPrompt).posts.first!.id
        let snap = EngineSnapshot(sessions: [h.engine.snapshot(session: "s1")!], global: h.engine.snapshotGlobal())
        var restored = Harness(background: true)
        _ = restored.engine.restore(snap, now: restored.now)
        let s = restored.engine.session("s1")!
        #expect(s.status == .awaitingInput)
        #expect(s.todos.map(\.id) == ["1"])
        #expect(restored.agent("s1", .toolUse(npmTest)).clears == [id])
    }

    @Test func theHourlyReminderGoesOnAfterAWait() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        h.advance(seconds: 600)
        h.agent("s1", Self.permissionPrompt)
        // An hour in, it still waits for the person: no "still working".
        #expect(!h.advance(seconds: 3000).posts.contains { $0.category == .longTask })
        h.agent("s1", .toolUse(npmTest))
        #expect(h.advance(seconds: 3600).posts.contains { $0.category == .longTask })
    }

    @Test func theTerminalPromptBesideOurRequestSurvivesARestart() {
        var h = ApprovalTests.pending()
        h.agent("s1", Self.permissionPrompt)
        let snap = EngineSnapshot(sessions: [h.engine.snapshot(session: "s1")!], global: h.engine.snapshotGlobal())
        var restored = Harness(background: true)
        restored.now = h.now
        _ = restored.engine.restore(snap, now: restored.now)
        restored.advance(seconds: 60)
        #expect(restored.engine.session("s1")!.status == .awaitingInput)
    }
}
