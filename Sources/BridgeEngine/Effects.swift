/// Effects are values: the host turns each into a server->client notification
/// (`notification.post`, `activity.update`, ...). The engine never performs them.
public enum Effect: Equatable, Sendable {
    case postNotification(NotificationRequest)
    case clearNotifications(ids: [String])
    case showBanner(Banner)
    case startActivity(ActivityContent)
    case updateActivity(ActivityContent)
    case endActivity(ActivityContent)
    case updateBadge(count: Int)
    /// `options`: what came with an allow or deny (none for a timeout or cancel).
    case approvalResolved(requestId: String, sessionId: String, decision: ApprovalResolution, by: String?,
                          options: DecisionOptions = .none)
    case questionAnswered(questionId: String, sessionId: String, answers: [String: [String]], by: String?)
    case sessionChanged(sessionId: String)
    /// Try the backend link again now (retry `attempt`, `delayMs` after the previous).
    case connectionRetry(attempt: Int, delayMs: Millis)
    /// End extended background work now (the seeds' endBackgroundTask).
    case endBackgroundWork(reason: BackgroundStopReason, sessionId: String)

    /// The RPC notification method this effect becomes.
    public var method: String {
        switch self {
        case .postNotification: return "notification.post"
        case .clearNotifications: return "notification.clear"
        case .showBanner: return "banner.show"
        case .startActivity: return "activity.start"
        case .updateActivity: return "activity.update"
        case .endActivity: return "activity.end"
        case .updateBadge: return "badge.update"
        case .approvalResolved: return "approval.resolved"
        case .questionAnswered: return "question.answered"
        case .sessionChanged: return "session.changed"
        case .connectionRetry: return "connection.retry"
        case .endBackgroundWork: return "background.end"
        }
    }
}

/// Why the front end must stop extended background work.
public enum BackgroundStopReason: String, Sendable, CaseIterable { case lowPowerMode }

/// How an approval ended.
public enum ApprovalResolution: String, Sendable, CaseIterable { case allow, deny, timedOut, cancelled }

/// UNNotificationInterruptionLevel, reduced to the three we use.
public enum InterruptionLevel: String, Sendable, CaseIterable { case passive, active, timeSensitive }

/// UNNotificationCategory identifiers.
public enum NotificationCategory: String, Sendable, CaseIterable {
    case approval, question, taskComplete, taskFailed, taskPaused, longTask, lowPowerMode, sessionHandoff
    case connectionLost, decisionNotSent, needsInput

    /// The localization key of its notifications' title.
    var titleKey: String {
        switch self {
        case .approval: return "notification.approval.title"
        case .question: return "notification.question.title"
        case .taskComplete: return "notification.complete.title"
        case .taskFailed: return "notification.error.title"
        case .taskPaused: return "notification.paused.title"
        case .longTask: return "notification.long_task.title"
        case .lowPowerMode: return "notification.low_power.title"
        case .sessionHandoff: return "notification.handoff.title"
        case .connectionLost: return "notification.connection_lost.title"
        case .decisionNotSent: return "notification.decision_expired.title"
        case .needsInput: return "notification.input.title"
        }
    }
}

public struct NotificationAction: Equatable, Sendable {
    public var id: String
    public var title: String
    /// Runs without opening the app (Approve/Deny from the lock screen).
    public var foreground: Bool
    public var destructive: Bool
}

/// A push/local notification to show (`notification.post`).
public struct NotificationRequest: Equatable, Sendable {
    public var id: String
    public var title: String
    public var body: String
    public var category: NotificationCategory
    public var actions: [NotificationAction]
    public var interruptionLevel: InterruptionLevel
    public var sound: Bool
    /// Groups a session's notifications (PRD "Grouping").
    public var threadId: String
    /// Pending approvals after this notification.
    public var badge: Int
    public var deepLink: String
    public var userInfo: [String: String]
}

/// In-app display while the app is in the foreground (`banner.show`).
public struct Banner: Equatable, Sendable {
    public enum Style: String, Sendable, CaseIterable { case approval, question, alert, info }
    public var id: String
    public var style: Style
    public var title: String
    public var body: String
    public var sessionId: String?
    public var deepLink: String?
    public var actions: [NotificationAction]
}
