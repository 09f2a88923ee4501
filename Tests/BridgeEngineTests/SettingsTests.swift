import Testing
import BridgeCore
@testable import BridgeEngine

/// Every setting: default from EDGE-CASES "User Settings", and what it changes.
@Suite struct SettingsTests {
    @Test func defaults() {
        let s = Settings()
        #expect(s.enableLiveActivities == true)
        #expect(s.enableBackgroundNotifications == true)
        #expect(s.showNotificationDetails == false)
        #expect(s.backgroundInLowPowerMode == false)
        #expect(s.enableTimeSensitiveNotifications == true)
        #expect(s.approvalTimeoutSeconds == 60)
        #expect(s.customRedactionRules.isEmpty)
        #expect(s.locale == "en")
    }

    static let secretCommand = ToolUse(name: "Bash", command: "curl -H 'x-api-key: \(secret)' https://api")

    @Test(arguments: [false, true])
    func showNotificationDetails(_ on: Bool) {
        var s = Settings()
        s.showNotificationDetails = on
        var h = Harness(settings: s, background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        let n = h.agent("s1", .approvalRequest(requestId: "r1", tool: Self.secretCommand, timeoutSeconds: nil)).posts[0]
        let activity = h.engine.currentActivity(now: h.now)!
        if on {
            #expect(n.body == "Run: curl -H 'x-api-key: [REDACTED]' https://api")
            #expect(activity.approval?.summary == "curl -H 'x-api-key: [REDACTED]' https://api")
        } else {
            #expect(n.body == "Claude needs permission to continue")
            #expect(activity.approval?.summary == "Claude needs permission to continue")
        }
        #expect(!n.body.contains(secret))
        #expect(!activity.rendered.lockScreen.contains(secret))
        // Completion summary follows the same rule.
        let done = h.agent("s1", .taskCompleted(summary: "Deployed with ANTHROPIC_API_KEY=\(secret)")).posts[0]
        #expect(done.body == (on ? "Deployed with ANTHROPIC_API_KEY=[REDACTED]" : "Claude finished working"))
    }

    @Test func detailsAreCappedAt200CharactersOnACharacterBoundary() {
        var s = Settings()
        s.showNotificationDetails = true
        var h = Harness(settings: s, background: true)
        let long = String(repeating: "é🙂", count: 300)
        let n = h.agent("s1", .taskCompleted(summary: long)).posts[0]
        #expect(n.body.count == 200)
        #expect(n.body.hasSuffix("…"))
        #expect(n.body.unicodeScalars.allSatisfy { $0.value != 0xFFFD })
        #expect(Privacy.truncate("short", to: 200) == "short")
    }

    @Test func enableBackgroundNotifications() {
        for on in [true, false] {
            var s = Settings()
            s.enableBackgroundNotifications = on
            var h = Harness(settings: s, background: true)
            h.agent("s1", .taskStarted(prompt: nil))
            #expect(h.agent("s1", .taskCompleted(summary: nil)).posts.count == (on ? 1 : 0))
        }
    }

    @Test func backgroundInLowPowerMode() {
        for allowed in [false, true] {
            var s = Settings()
            s.backgroundInLowPowerMode = allowed
            var h = Harness(settings: s, background: true)
            h.agent("s1", .taskStarted(prompt: nil))
            let fx = h.send(.app(AppUpdate(lowPowerMode: true)))
            #expect(fx.posts.map(\.title) == (allowed ? [] : ["Low Power Mode"]))
            // Extended work stops (the seeds' endBackgroundTask), with the notification.
            #expect(fx.contains(.endBackgroundWork(reason: .lowPowerMode, sessionId: "s1")) == !allowed)
            // Once per episode.
            let again = h.send(.app(AppUpdate(lowPowerMode: true)))
            #expect(again.posts.isEmpty && !again.contains { $0.method == "background.end" })
        }
    }

    @Test func enableTimeSensitiveNotifications() {
        for on in [true, false] {
            var s = Settings()
            s.enableTimeSensitiveNotifications = on
            var h = Harness(settings: s, background: true)
            let n = h.agent("s1", .approvalRequest(requestId: "r", tool: npmTest, timeoutSeconds: nil)).posts[0]
            #expect(n.interruptionLevel == (on ? .timeSensitive : .active))
        }
    }

    @Test func localeChangesStringsAndFallsBackToEnglish() {
        var s = Settings()
        s.locale = "de-DE"
        var h = Harness(settings: s, background: true)
        h.agent("s1", .taskStarted(prompt: nil))
        let n = h.agent("s1", .approvalRequest(requestId: "r", tool: npmTest, timeoutSeconds: nil)).posts[0]
        #expect(n.title == "Freigabe nötig")
        #expect(n.actions.map(\.title) == ["Erlauben", "Ablehnen"])
        let strings = Strings(locale: "de")
        #expect(strings["notification.paused.title"] == "Task Paused")   // not translated: English
        #expect(Strings(locale: "xx")["activity.processing"] == "Processing")
    }
}

@Suite struct LocalizationTests {
    /// Keys and English values exactly as EDGE-CASES "Localization" lists them.
    @Test func seedTableIsPresentVerbatim() {
        let seed: [String: String] = [
            "notification.approval.title": "Approval Needed",
            "notification.approval.body.generic": "Claude needs permission to continue",
            "notification.approval.body.detailed": "Execute: %@",
            "notification.question.title": "Claude has a question",
            "notification.complete.title": "Task Complete",
            "notification.complete.body.generic": "Claude finished working",
            "notification.error.title": "Task Failed",
            "notification.paused.title": "Task Paused",
            "notification.paused.body": "Background time expired. Open app to continue.",
            "activity.processing": "Processing",
            "activity.awaiting_approval": "Approval needed",
            "activity.awaiting_answer": "Question pending",
            "activity.completed": "Completed",
            "activity.error": "Error occurred",
            "activity.elapsed": "Elapsed: %@",
        ]
        for (k, v) in seed { #expect(Localization.english[k] == v, "\(k)") }
    }

    @Test func everyLocaleKeyExistsInEnglish() {
        for (_, table) in Localization.tables {
            for k in table.keys { #expect(Localization.english[k] != nil, "\(k)") }
        }
    }

    @Test("the elapsed-time words of the app's tables: English is the formatter's own, German fills its units")
    func elapsedWords() {
        #expect(ElapsedFormatter.Words(table: Localization.english) == .english)
        let de = ElapsedFormatter(words: .init(table: Localization.table(for: "de-DE")))
        #expect(de.string(seconds: 3787, style: .spoken) == "1 Stunde, 3 Minuten, 7 Sekunden")
        #expect(de.string(seconds: 172_800, style: .short) == "2T")
        #expect(de.string(seconds: .nan, style: .spoken) == "unbekannte Dauer")
    }

    @Test func fill() {
        #expect(Strings.fill("%d of %d tasks", ["3", "7"]) == "3 of 7 tasks")
        #expect(Strings.fill("100% done %@", ["x"]) == "100% done x")
        #expect(Strings.fill("%@ %@", ["a"]) == "a ")
    }
}

@Suite struct OperationTextTests {
    @Test(arguments: [
        ("Bash", "npm test", "Running tests"), ("Bash", "cd app && npm run test", "Running tests"),
        ("Bash", "pytest -x tests/", "Running tests"), ("Bash", "swift test --filter X", "Running tests"),
        ("Bash", "CI=1 go test ./...", "Running tests"), ("Bash", "npm run build", "Building project"),
        ("Bash", "swift build -c release", "Building project"), ("Bash", "make -j4", "Building project"),
        ("Bash", "xcodebuild -scheme App", "Building project"), ("Bash", "npm install left-pad", "Installing dependencies"),
        ("Bash", "pip install -r requirements.txt", "Installing dependencies"), ("Bash", "npx eslint src", "Checking code style"),
        ("Bash", "git status", "Working with git"), ("Bash", "ls -la", "Running a command"),
        ("Bash", "echo make test", "Running a command"),
        ("Edit", "", "Editing files"), ("Write", "", "Editing files"), ("MultiEdit", "", "Editing files"),
        ("Read", "", "Reading code"), ("Grep", "", "Reading code"), ("Glob", "", "Reading code"),
        ("WebFetch", "", "Searching the web"), ("TodoWrite", "", "Planning tasks"), ("Task", "", "Working on a subtask"),
        ("mcp__x__y", "", "Working"),
    ])
    func derive(_ tool: String, _ command: String, _ expected: String) {
        let t = ToolUse(name: tool, command: command.isEmpty ? nil : command)
        #expect(Strings(locale: "en")[OperationText.key(for: t)] == expected)
    }
}

@Suite struct DeepLinkTests {
    @Test func routesRoundTrip() {
        let links: [DeepLink] = [.session(id: "s1"), .approval(sessionId: "s 1/x", requestId: "r?1"),
                                 .question(sessionId: "sé", questionId: "q#"), .notificationSettings]
        for l in links { #expect(DeepLink.parse(l.url) == .success(l)) }
        #expect(DeepLink.approval(sessionId: "s1", requestId: "r1").url == "codingbridge://session/s1/approval/r1")
        #expect(DeepLink.notificationSettings.url == "codingbridge://settings/notifications")
    }

    @Test func rejects() {
        #expect(DeepLink.parse("https://x/session/1") == .failure(.notCodingBridge))
        #expect(DeepLink.parse("codingbridge://session/a/b") == .failure(.unknownRoute("session/a/b")))
        #expect(DeepLink.parse("codingbridge://session/%zz") == .failure(.badEncoding("%zz")))
        #expect(DeepLink.parse("codingbridge://session/%FF") == .failure(.badEncoding("%FF")))
        #expect(DeepLink.parse("codingbridge://session//approval/r") == .failure(.badEncoding("")))
        #expect(DeepLink.parse("codingbridge://session/s1?x=1") == .success(.session(id: "s1")))
    }
}

@Suite struct MetricsTests {
    @Test func countersAndLatency() {
        var h = Harness(background: true)
        h.send(.agent(AgentEvent(sessionId: "s1", kind: .taskStarted(prompt: nil))))
        h.send(.agent(AgentEvent(sessionId: "s1", kind: .approvalRequest(requestId: "r", tool: npmTest, timeoutSeconds: nil),
                                 sentAt: h.now - 40)))
        h.respond("r", .allow, source: .notification)
        h.send(.agent(AgentEvent(sessionId: "s1", kind: .taskCompleted(summary: nil), sentAt: h.now - 10)))
        let m = h.engine.metrics
        #expect(m[.notificationSent] == 2)
        #expect(m[.approvalFromNotification] == 1)
        #expect(m[.liveActivityStarted] == 1)
        #expect(m[.liveActivityEnded] == 1)
        #expect(m.latencyCount == 2)
        #expect(m.latencyMaxMs == 40)
        #expect(m.latencyAverageMs == 25)
        #expect(m.recoveryRate == 1.0)
    }
}

@Suite struct AppMetricTests {
    @Test func appReportedCountersAndRecoveryRate() {
        var h = Harness()
        h.engine.recordAppMetric(.notificationTapped)
        h.engine.recordAppMetric(.backgroundRecoveryAttempted, count: 4)
        h.engine.recordAppMetric(.backgroundRecoverySucceeded, count: 3)
        #expect(h.engine.metrics[.notificationTapped] == 1)
        #expect(h.engine.metrics.recoveryRate == 0.75)
        #expect(!BackgroundMetric.appReported.contains(.notificationSent))   // the engine counts that itself
    }
}
