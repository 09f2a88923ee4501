import Testing
@testable import BridgeEngine

/// Every row of OVERVIEW "Notification Behavior", in foreground and background.
@Suite struct NotificationTableTests {
    /// Drives the engine to the point where `event` happens, then returns the effects of that event.
    static func play(_ event: NotificationPolicy.Event, background: Bool, settings: Settings = Settings()) -> (Harness, [Effect]) {
        var h = Harness(settings: settings, background: background)
        if event != .taskStarts { h.agent("s1", .taskStarted(prompt: "fix tests")) }
        h.advance(seconds: 5)
        let fx: [Effect]
        switch event {
        case .taskStarts: fx = h.agent("s1", .taskStarted(prompt: "fix tests"))
        case .progressUpdate:
            fx = h.agent("s1", .progress(todos: [Todo(content: "a", status: .completed),
                                                   Todo(content: "b", status: .in_progress, activeForm: "Running unit tests")]))
        case .approvalNeeded: fx = h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        case .questionAsked:
            fx = h.agent("s1", .question(questionId: "q1", questions: [Question(question: "Which database should we use?",
                                                                                 header: "DB", options: [.init(label: "Postgres")])]))
        case .taskComplete: fx = h.agent("s1", .taskCompleted(summary: "All tests passed"))
        case .errorOccurred: fx = h.agent("s1", .taskFailed(error: "Build error occurred"))
        }
        return (h, fx)
    }

    @Test(arguments: NotificationPolicy.Event.allCases)
    func foregroundRow(_ event: NotificationPolicy.Event) {
        let (_, fx) = Self.play(event, background: false)
        let row = NotificationPolicy.row(event)
        // Foreground: never a push, never a Live Activity.
        #expect(fx.posts.isEmpty)
        #expect(fx.starts.isEmpty && fx.updates.isEmpty)
        switch row.foreground {
        case .none: #expect(fx.banners.isEmpty)
        case .banner(let style):
            #expect(fx.banners.count == 1)
            #expect(fx.banners.first?.style == style)
        }
    }

    @Test(arguments: NotificationPolicy.Event.allCases)
    func backgroundRow(_ event: NotificationPolicy.Event) {
        let (h, fx) = Self.play(event, background: true)
        let row = NotificationPolicy.row(event)
        #expect(fx.banners.isEmpty)
        switch row.background {
        case .liveActivityStart:
            #expect(fx.posts.isEmpty)
            #expect(fx.starts.count == 1)
            #expect(fx.starts.first?.status == .processing)
        case .liveActivityUpdate:
            #expect(fx.posts.isEmpty)
            #expect(fx.updates.count == 1)
            #expect(fx.updates.first?.progressText == "1 of 2 tasks")
        case let .push(sound, actionable):
            #expect(fx.posts.count == 1)
            let n = fx.posts[0]
            #expect(n.sound == sound)
            #expect(n.actions.map(\.id) == (actionable ? ["approve", "deny"] : n.actions.map(\.id)))
            if !actionable { #expect(!n.actions.contains { $0.id == "approve" }) }
            #expect(n.threadId == "s1")
            #expect(n.interruptionLevel == NotificationPolicy.interruptionLevel(event, settings: Settings()))
            #expect(n.badge == h.engine.state.pendingApprovalCount)
        }
    }

    @Test func exactTitlesBodiesAndLinks() {
        let cases: [(NotificationPolicy.Event, String, String, String, InterruptionLevel)] = [
            (.approvalNeeded, "Approval Needed", "Claude needs permission to continue", "codingbridge://session/s1/approval/r1", .timeSensitive),
            (.questionAsked, "Claude has a question", "Claude is waiting for your answer", "codingbridge://session/s1/question/q1", .timeSensitive),
            (.taskComplete, "Task Complete", "Claude finished working", "codingbridge://session/s1", .active),
            (.errorOccurred, "Task Failed", "Something went wrong. Open the app for details.", "codingbridge://session/s1", .active),
        ]
        for (event, title, body, link, level) in cases {
            let (_, fx) = Self.play(event, background: true)
            let n = fx.posts[0]
            #expect(n.title == title)
            #expect(n.body == body)          // details off by default: generic
            #expect(n.deepLink == link)
            #expect(n.userInfo["deepLink"] == link)
            #expect(n.interruptionLevel == level)
        }
    }

    @Test func timeSensitiveSettingOffMakesApprovalsActive() {
        var s = Settings()
        s.enableTimeSensitiveNotifications = false
        for e in [NotificationPolicy.Event.approvalNeeded, .questionAsked] {
            let (_, fx) = Self.play(e, background: true, settings: s)
            #expect(fx.posts[0].interruptionLevel == .active)
        }
        // Completions respect Focus whatever the setting says.
        let (_, fx) = Self.play(.taskComplete, background: true, settings: Settings())
        #expect(fx.posts[0].interruptionLevel == .active)
    }

    @Test func toolUseNeverNotifies() {
        for bg in [false, true] {
            var h = Harness(background: bg)
            h.agent("s1", .taskStarted(prompt: nil))
            for cmd in ["npm test", "ls", "swift build", "cat x"] {
                let fx = h.agent("s1", .toolUse(ToolUse(name: "Bash", command: cmd)))
                #expect(fx.posts.isEmpty && fx.banners.isEmpty)
            }
        }
    }

    @Test func backgroundNotificationsOffOrPermissionDeniedRemembersMissed() {
        var s = Settings()
        s.enableBackgroundNotifications = false
        var h = Harness(settings: s, background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        #expect(h.agent("s1", .taskCompleted(summary: nil)).posts.isEmpty)
        var h2 = Harness(background: true)
        h2.send(.app(AppUpdate(notificationPermission: .denied)))
        h2.agent("s1", .taskStarted(prompt: nil))
        #expect(h2.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil)).posts.isEmpty)
        #expect(h2.agent("s1", .taskFailed(error: "x")).posts.isEmpty)
        #expect(h2.engine.state.missedWhileAway == 2)
        let back = h2.setBackground(false)
        #expect(back.banners.count == 1)
        #expect(back.banners[0].body == "2 notifications could not be shown: Approval Needed (1), Task Failed (1). Turn on notifications to stay informed.")
        #expect(back.banners[0].deepLink == "codingbridge://settings/notifications")
        #expect(h2.engine.state.missedWhileAway == 0)
    }

    @Test func approvalShownInAppIsPushedWhenLeavingTheApp() {
        var h = Harness()
        h.agent("s1", .taskStarted(prompt: nil))
        h.agent("s1", .approvalRequest(requestId: "r1", tool: npmTest, timeoutSeconds: nil))
        let fx = h.setBackground(true)
        #expect(fx.posts.map(\.id) == ["approval:r1"])
        #expect(fx.posts[0].actions.map(\.title) == ["Approve", "Deny"])
    }
}
