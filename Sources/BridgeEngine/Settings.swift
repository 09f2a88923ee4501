/// User settings (EDGE-CASES "User Settings": the five `@AppStorage` toggles with
/// their defaults) plus the approval timeout, custom redaction rules and locale.
public struct Settings: Equatable, Sendable {
    /// enableLiveActivities (default true): Live Activity for task progress.
    public var enableLiveActivities = true
    /// enableBackgroundNotifications (default true): pushes while not in foreground.
    public var enableBackgroundNotifications = true
    /// showNotificationDetails (default false): when false, lock-screen text is
    /// generic ("Claude needs permission to continue") instead of command details.
    public var showNotificationDetails = false
    /// backgroundInLowPowerMode (default false): when false, Low Power Mode in
    /// background stops extended work and the user is told once.
    public var backgroundInLowPowerMode = false
    /// enableTimeSensitiveNotifications (default true): approvals break through Focus.
    public var enableTimeSensitiveNotifications = true
    /// "Approval Request Timeout": backend default 60 s.
    public var approvalTimeoutSeconds: Double = 60
    /// Extra redaction rules, applied by the redactor after its built-in ones.
    /// Validated (compiled) by the host before they reach the engine.
    public var customRedactionRules: [RedactionRule] = []
    /// Locale of every user-visible string (see Localization.swift).
    public var locale: String = "en"

    public init() {}

    /// Bounds for `approvalTimeoutSeconds`; outside is a caller error.
    public static let approvalTimeoutRange: ClosedRange<Double> = 1 ... 86_400
}

/// A user-defined redaction pattern (PCRE2 syntax, compiled by the redactor).
public struct RedactionRule: Equatable, Sendable {
    public var name: String
    public var pattern: String
    public var replacement: String
    public init(name: String, pattern: String, replacement: String = "[REDACTED]") {
        self.name = name
        self.pattern = pattern
        self.replacement = replacement
    }
}
