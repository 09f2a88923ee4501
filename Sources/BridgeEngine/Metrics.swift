/// EDGE-CASES "Analytics & Telemetry": `BackgroundMetric` counters, plus the
/// success metrics of OVERVIEW (zero missed approvals, < 5 s notification
/// latency, recovery rate > 95 %).
public enum BackgroundMetric: String, Sendable, CaseIterable {
    // Notifications
    case notificationSent, notificationTapped, notificationDismissed
    case approvalFromNotification, denialFromNotification
    // Live Activities
    case liveActivityStarted, liveActivityEnded, liveActivityTapped
    // Background
    case backgroundTaskStarted, backgroundTaskCompleted, backgroundTaskExpired
    case backgroundRecoveryAttempted, backgroundRecoverySucceeded
    // Errors
    case pushTokenRegistrationFailed, liveActivityStartFailed, notificationDeliveryFailed
}

extension BackgroundMetric {
    /// Counters only the app can observe; the engine counts the others itself
    /// (notificationSent, approvalFromNotification, liveActivityStarted, ...).
    public static let appReported: [BackgroundMetric] = [
        .notificationTapped, .notificationDismissed, .liveActivityTapped, .backgroundRecoveryAttempted,
        .backgroundRecoverySucceeded, .pushTokenRegistrationFailed, .liveActivityStartFailed, .notificationDeliveryFailed,
    ]
}

public struct Metrics: Equatable, Sendable {
    public private(set) var counters: [BackgroundMetric: Int] = [:]
    /// Approvals that timed out before anyone answered ("Zero missed approvals").
    public private(set) var missedApprovals = 0
    /// Event sent (agent side) -> notification effect, in ms.
    public private(set) var latencyCount = 0
    public private(set) var latencyTotalMs: Int64 = 0
    public private(set) var latencyMaxMs: Int64 = 0
    /// `sentAt` values left out of the latency figures as implausible.
    public private(set) var implausibleSentAt = 0

    public init() {}

    public subscript(_ m: BackgroundMetric) -> Int { counters[m, default: 0] }

    public mutating func count(_ m: BackgroundMetric, by n: Int = 1) { counters[m, default: 0] += n }
    mutating func missedApproval() { missedApprovals += 1 }
    mutating func restoreMissedApprovals(_ n: Int) { missedApprovals = max(0, n) }
    /// A `sentAt` further than a day from now is not a latency (a clock in
    /// seconds, or garbage): it is left out rather than skew the figures,
    /// and counted.
    static let plausibleLatencyMs: Int64 = 86_400_000

    mutating func latency(sentAt: Int64, now: Int64) {
        let (ms, overflow) = now.subtractingReportingOverflow(sentAt)
        guard !overflow, abs(ms) <= Self.plausibleLatencyMs else {
            implausibleSentAt += 1
            return
        }
        let v = max(0, ms)
        latencyCount += 1
        latencyTotalMs = latencyTotalMs.addingReportingOverflow(v).overflow ? .max : latencyTotalMs + v
        latencyMaxMs = max(latencyMaxMs, v)
    }

    /// The latency figures of a snapshot (they survive restarts like the counters).
    mutating func restoreLatency(count: Int, totalMs: Int64, maxMs: Int64, implausible: Int) {
        latencyCount = max(0, count)
        latencyTotalMs = max(0, totalMs)
        latencyMaxMs = max(0, maxMs)
        implausibleSentAt = max(0, implausible)
    }

    public var latencyAverageMs: Double? {
        latencyCount == 0 ? nil : Double(latencyTotalMs) / Double(latencyCount)
    }

    /// successes / attempts, within [0, 1]; 1.0 with no attempts (nothing
    /// failed to recover). The app reports both counters: more successes
    /// than attempts is its miscount, not a rate above 100 %.
    public var recoveryRate: Double {
        let attempts = self[.backgroundRecoveryAttempted]
        guard attempts > 0 else { return 1.0 }
        return min(1, max(0, Double(self[.backgroundRecoverySucceeded]) / Double(attempts)))
    }
}
