import Testing
@testable import BridgeEngine

@Suite struct LiveActivityTests {
    @Test func startsOnBackgroundWhileProcessingAndEndsOnCompletion() {
        var h = Harness()
        h.agent("s1", .taskStarted(prompt: nil))
        h.advance(seconds: 165)
        let fx = h.setBackground(true)
        #expect(fx.starts.count == 1)
        let c = fx.starts[0]
        #expect(c.rendered.compact == "MyApp · working · 2:45")
        #expect(c.rendered.lockScreen.contains("Elapsed: 2:45"))
        // Details off (the default): the name without the path.
        #expect(c.rendered.lockScreen.hasPrefix("MyApp\n") && c.projectPath == nil)
        let done = h.agent("s1", .taskCompleted(summary: "All tests passing"))
        #expect(done.ends.count == 1)
        #expect(done.ends[0].status == .completed)
        #expect(h.engine.state.activity == nil)
    }

    @Test func notStartedInForegroundOrWhenIdle() {
        var h = Harness()
        #expect(h.setBackground(true).starts.isEmpty)      // nothing running
        h.setBackground(false)
        h.agent("s1", .taskStarted(prompt: nil))
        #expect(h.engine.state.activity == nil)
    }

    @Test func progressUpdatesSilentlyAndOnlyOnChange() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        let todos = [Todo(content: "unit", status: .completed), Todo(content: "auth", status: .in_progress, activeForm: "Fixing auth test"),
                     Todo(content: "c", status: .pending), Todo(content: "d", status: .pending), Todo(content: "e", status: .pending)]
        let fx = h.agent("s1", .progress(todos: todos))
        #expect(fx.updates.count == 1)
        #expect(fx.updates[0].progressText == "1 of 5 tasks")
        // Details off (the default): counts, not the todo's text.
        #expect(fx.updates[0].rendered.lockScreen.contains("1 of 5 tasks complete\n"))
        #expect(fx.updates[0].progress?.current == nil)
        #expect(fx.posts.isEmpty)
        h.advance(seconds: 3)
        #expect(h.agent("s1", .progress(todos: todos)).updates.isEmpty)       // same state: no update
        #expect(h.agent("s1", .toolUse(npmTest)).updates.first?.operation == "Running tests")
        #expect(h.agent("s1", .toolUse(ToolUse(name: "Bash", command: "npm test -- --watch=false"))).updates.isEmpty)
    }

    @Test func twoSessionsCompeteForTheOneActivity() {
        var h = Harness(background: true)
        h.agent("a", .taskStarted(prompt: nil), project: "Alpha")
        h.advance(seconds: 1)
        let fx = h.agent("b", .taskStarted(prompt: nil), project: "Beta")
        // The newest session takes it: end A, start B.
        #expect(fx.ends.map(\.sessionId) == ["a"])
        #expect(fx.starts.map(\.sessionId) == ["b"])
        // Tool use in A does not steal it back (no flicker) ...
        let t = h.agent("a", .toolUse(npmTest), project: "Alpha")
        #expect(t.starts.isEmpty && t.ends.isEmpty)
        // ... but an approval in A does: it needs the person.
        let ap = h.agent("a", .approvalRequest(requestId: "ra", tool: npmTest, timeoutSeconds: nil), project: "Alpha")
        #expect(ap.starts.map(\.sessionId) == ["a"])
        #expect(ap.posts.count == 1)      // other sessions still get notifications
        // A completes: the activity goes back to B, still processing.
        h.respond("ra", .allow)
        let done = h.agent("a", .taskCompleted(summary: nil), project: "Alpha")
        #expect(done.ends.map(\.sessionId) == ["a"])
        #expect(done.starts.map(\.sessionId) == ["b"])
    }

    @Test func disabledInSettingsOrByPermissionMeansNotificationsOnly() {
        var s = Settings()
        s.enableLiveActivities = false
        var h = Harness(settings: s, background: true)
        #expect(h.engine.liveActivityStatus == .disabledInApp)
        #expect(h.agent("s1", .taskStarted(prompt: nil)).starts.isEmpty)
        #expect(h.agent("s1", .taskCompleted(summary: nil)).posts.count == 1)

        var h2 = Harness(background: true)
        h2.agent("s1", .taskStarted(prompt: nil))
        let fx = h2.send(.app(AppUpdate(liveActivitiesPermitted: false)))
        #expect(fx.ends.count == 1)
        #expect(h2.engine.liveActivityStatus == .disabledByUser)
        // Turning the setting off ends the current activity (EDGE-CASES Settings UI).
        var h3 = Harness(background: true)
        h3.agent("s1", .taskStarted(prompt: nil))
        var off = Settings()
        off.enableLiveActivities = false
        #expect(h3.send(.settings(off)).ends.count == 1)
    }

    @Test func returnToForegroundEndsItOnlyWhenIdle() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        #expect(h.setBackground(false).ends.isEmpty)          // still processing
        h.setBackground(true)
        h.agent("s1", .sessionHandoff(to: "desktop"))
        #expect(h.engine.state.activity == nil)
    }

    @Test func handoffEndsWithMessage() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        let fx = h.agent("s1", .sessionHandoff(to: "desktop"))
        #expect(fx.ends.first?.message == "Session continued on another device")
        #expect(fx.posts.first?.title == "Session Handed Off")
        #expect(fx.posts.first?.interruptionLevel == .passive)
        #expect(fx.posts.first?.sound == false)
        #expect(h.engine.session("s1")!.activeDevice == "desktop")
    }

    /// EDGE-CASES "Session Handoff", Detection: activity from another device
    /// than the one showing the Live Activity (a message, a decision, an
    /// answer) ends it; the agent keeps working; the showing device itself, or
    /// the same device again, changes nothing.
    @Test func activityFromAnotherDeviceEndsTheActivity() {
        var h = Harness()
        h.send(.app(AppUpdate(phase: .background, deviceId: "iphone"))) // the iPhone shows the activity
        h.agent("s1", .taskStarted(prompt: nil))
        #expect(h.engine.state.activity?.sessionId == "s1")
        #expect(h.send(.userMessage(sessionId: "s1", deviceId: "iphone")).ends.isEmpty) // its own device
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        let (r, fx) = h.respond("r1", .allow, device: "mac")
        #expect(r.status == .accepted)
        #expect(fx.ends.map(\.message) == ["Session continued on another device"])
        #expect(fx.ends.first?.rendered.lockScreen.hasSuffix("Session continued on another device") == true)
        #expect(fx.posts.map(\.title) == ["Session Handed Off"])
        #expect(fx.posts.first?.interruptionLevel == .passive)
        #expect(fx.posts.first?.userInfo["handedOffTo"] == "mac")
        #expect(fx.posts.first?.userInfo["handedOffFrom"] == "iphone")
        #expect(fx.starts.isEmpty) // not straight back to the same session
        #expect(h.engine.session("s1")!.status == .processing)
        #expect(h.engine.session("s1")!.activeDevice == "mac")
        // The Mac keeps going: nothing more to end.
        #expect(h.send(.userMessage(sessionId: "s1", deviceId: "mac")).isEmpty)
        // A later significant event starts an activity on the iPhone again;
        // the Mac acting in its app ends it again, although it acted last too.
        #expect(h.agent("s1", .approvalRequest(requestId: "r2", tool: npmTest, timeoutSeconds: nil)).starts.count == 1)
        #expect(h.respond("r2", .allow, device: "mac").1.ends.map(\.message) == ["Session continued on another device"])
        // On the iPhone itself (its app, its lock screen) nothing is handed off.
        #expect(h.agent("s1", .approvalRequest(requestId: "r3", tool: npmTest, timeoutSeconds: nil)).starts.count == 1)
        #expect(h.respond("r3", .allow, device: "iphone").1.ends.isEmpty)
        #expect(h.engine.session("s1")!.activeDevice == "iphone")
        h.agent("s1", .question(questionId: "q1", questions: [Question(question: "Which?", options: [.init(label: "A")])]))
        let q = h.engine.apply(.questionAnswer(questionId: "q1", answers: ["Which?": ["A"]], deviceId: "iphone"), now: h.now)
        #expect(q.effects.ends.isEmpty)
        // A decision on the Live Activity or a notification is the showing device's.
        h.agent("s1", .approvalRequest(requestId: "r4", tool: npmTest, timeoutSeconds: nil))
        #expect(h.respond("r4", .deny, device: "ipad", source: .liveActivity).1.ends.isEmpty)
        #expect(h.engine.state.activity?.sessionId == "s1")
        // Another app reporting its state later does not move an activity already shown.
        h.send(.app(AppUpdate(deviceId: "ipad")))
        #expect(h.engine.state.activity?.device == "iphone")
    }

    /// Without app.update from a known device, the session's previous device
    /// is taken as the one showing the activity.
    @Test func withoutAnAppDeviceThePreviousDeviceHoldsTheActivity() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        #expect(h.send(.userMessage(sessionId: "s1", deviceId: "iphone")).ends.isEmpty) // the first device claims it
        #expect(h.send(.userMessage(sessionId: "s1", deviceId: "mac")).ends.map(\.message) == ["Session continued on another device"])
    }

    @Test func deviceChangeOnAnotherSessionLeavesTheActivityAlone() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s2", .taskStarted(prompt: nil))
        let holder = h.engine.state.activity!.sessionId
        let other = holder == "s1" ? "s2" : "s1"
        h.send(.userMessage(sessionId: other, deviceId: "iphone"))
        let fx = h.send(.userMessage(sessionId: other, deviceId: "mac"))
        #expect(fx.ends.isEmpty && fx.posts.isEmpty)
        #expect(h.engine.state.activity?.sessionId == holder)
        // Unknown sessions are not created by a message.
        #expect(h.send(.userMessage(sessionId: "nope", deviceId: "mac")).isEmpty)
        #expect(h.engine.session("nope") == nil)
    }

    @Test func longTaskEndsActivityAndRemindsHourly() {
        var h = Harness(background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .toolUse(npmTest))
        #expect(h.advance(seconds: 3599).posts.isEmpty)
        let fx = h.advance(seconds: 1)
        #expect(fx.ends.count == 1)
        #expect(fx.posts.map(\.title) == ["Claude is still working"])
        #expect(fx.posts[0].body == "Running for 1:00:00: Running tests")
        #expect(h.advance(seconds: 3600).posts.count == 1)
        // No restart of the activity for a long task on the next event.
        #expect(h.agent("s1", .toolUse(ToolUse(name: "Read", filePath: "a"))).starts.isEmpty)
        h.agent("s1", .taskCompleted(summary: nil))
        #expect(h.advance(seconds: 7200).posts.isEmpty)
    }

    @Test func renderedStringsForApprovalAndTruncatedName() {
        var s = Settings()
        s.showNotificationDetails = true
        var h = Harness(settings: s, background: true)
        h.agent("s1", .taskStarted(prompt: nil), project: "AVeryLongProjectNameIndeed")
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil), project: nil)
        let c = h.engine.currentActivity(now: h.now)!
        #expect(c.rendered.compact == "AVeryLongPr… · waiting · 0:00")
        #expect(c.rendered.expanded.hasPrefix("AVeryLongProjectNameIndeed — Approval needed\nBash: npm test"))
        #expect(c.rendered.lockScreen.hasSuffix("Bash: npm test\nApprove | Deny"))
        #expect(c.approval?.expiresAt == h.now + 60_000)
    }
}
