/// OVERVIEW "Notification Behavior", exactly:
///
/// | Event           | When App Foreground | When App Background              |
/// |-----------------|---------------------|----------------------------------|
/// | Task starts     | No notification     | Live Activity starts             |
/// | Progress update | No notification     | Live Activity updates (silent)   |
/// | Approval needed | In-app banner       | Push notification with actions   |
/// | Question asked  | In-app display      | Push notification                |
/// | Task complete   | No notification     | Push notification with sound     |
/// | Error occurred  | In-app alert        | Push notification with sound     |
///
/// Interruption levels (PRD US-4.3): approvals (and questions: they block
/// Claude the same way) are time-sensitive when enableTimeSensitiveNotifications
/// is on, else active; completions and errors are active, so they respect Focus.
/// Nothing per tool is ever pushed (OVERVIEW "Non-Goals": too noisy).
public enum NotificationPolicy {
    public enum Event: String, Sendable, CaseIterable {
        case taskStarts, progressUpdate, approvalNeeded, questionAsked, taskComplete, errorOccurred
    }
    public enum Foreground: Equatable, Sendable {
        case none
        case banner(Banner.Style)
    }
    public enum Background: Equatable, Sendable {
        case liveActivityStart
        case liveActivityUpdate
        /// `actionable`: Approve / Deny buttons.
        case push(sound: Bool, actionable: Bool)
    }
    public struct Row: Equatable, Sendable {
        public var event: Event
        public var foreground: Foreground
        public var background: Background
    }

    public static let table: [Row] = [
        Row(event: .taskStarts, foreground: .none, background: .liveActivityStart),
        Row(event: .progressUpdate, foreground: .none, background: .liveActivityUpdate),
        Row(event: .approvalNeeded, foreground: .banner(.approval), background: .push(sound: true, actionable: true)),
        Row(event: .questionAsked, foreground: .banner(.question), background: .push(sound: true, actionable: false)),
        Row(event: .taskComplete, foreground: .none, background: .push(sound: true, actionable: false)),
        Row(event: .errorOccurred, foreground: .banner(.alert), background: .push(sound: true, actionable: false)),
    ]

    public static func row(_ e: Event) -> Row { table.first { $0.event == e }! }

    public static func interruptionLevel(_ e: Event, settings: Settings) -> InterruptionLevel {
        switch e {
        case .approvalNeeded, .questionAsked:
            return settings.enableTimeSensitiveNotifications ? .timeSensitive : .active
        case .taskComplete, .errorOccurred:
            return .active
        case .taskStarts, .progressUpdate:
            return .passive
        }
    }
}

extension Engine {
    /// Pushes are possible: app in background, background notifications on,
    /// notification permission granted.
    var canPush: Bool {
        state.app.isBackground && state.settings.enableBackgroundNotifications
            && state.app.notificationPermission.canPost
    }

    /// Posts a notification if the person is away and pushes are possible;
    /// when they are away but it cannot be shown, remembers it for the
    /// "while you were away" banner (EDGE-CASES "Notification Permission Denied").
    /// Returns whether a notification was posted.
    @discardableResult
    mutating func push(_ n: NotificationRequest, sentAt: Millis?, now: Millis, into effects: inout [Effect]) -> Bool {
        guard state.app.isBackground else { return false }
        guard canPush else {
            state.missedWhileAway += 1
            state.missedByCategory[n.category, default: 0] += 1
            return false
        }
        var n = n
        n.badge = state.pendingApprovalCount
        effects.append(.postNotification(n))
        state.metrics.count(.notificationSent)
        if let sentAt { state.metrics.latency(sentAt: sentAt, now: now) }
        return true
    }

    func approvalActions() -> [NotificationAction] {
        [NotificationAction(id: "approve", title: strings["notification.approval.action.approve"], foreground: false, destructive: false),
         NotificationAction(id: "deny", title: strings["notification.approval.action.deny"], foreground: false, destructive: true)]
    }

    func openAppAction() -> [NotificationAction] {
        [NotificationAction(id: "open", title: strings["notification.question.action.open"], foreground: true, destructive: false)]
    }

    /// Notification body for an approval, per showNotificationDetails.
    func approvalBody(_ tool: ToolUse) -> String {
        let generic = strings["notification.approval.body.generic"]
        guard state.settings.showNotificationDetails else { return generic }
        let detail = Privacy.lockScreenText(tool.detail, generic: generic, settings: state.settings, services: services)
        let key: String
        switch tool.name {
        case "Bash", "Shell": key = "notification.approval.body.detailed.run"
        case "Edit", "MultiEdit", "Write", "NotebookEdit": key = "notification.approval.body.detailed.edit"
        default: key = "notification.approval.body.detailed"
        }
        // The template adds a few characters; the 200 cap is on the whole body.
        return Privacy.truncate(strings.format(key, detail), to: Privacy.maxDetailCharacters)
    }

    func makeNotification(id: String, title: String, body: String, category: NotificationCategory,
                          event: NotificationPolicy.Event?, level: InterruptionLevel? = nil, sound: Bool,
                          actions: [NotificationAction], session: Session, link: DeepLink,
                          extra: [String: String] = [:]) -> NotificationRequest {
        var info = extra
        info["type"] = category.rawValue
        info["sessionId"] = session.id
        if let p = session.projectPath { info["projectPath"] = p }
        info["deepLink"] = link.url
        return NotificationRequest(
            id: id, title: title, body: body, category: category, actions: actions,
            interruptionLevel: level ?? event.map { NotificationPolicy.interruptionLevel($0, settings: state.settings) } ?? .active,
            sound: sound, threadId: session.id, badge: state.pendingApprovalCount, deepLink: link.url, userInfo: info)
    }
}
