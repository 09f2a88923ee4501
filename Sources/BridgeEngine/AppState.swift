/// What the app (the front end embedding or driving the core) tells us about itself.
public struct AppState: Equatable, Sendable {
    public enum Phase: String, Sendable, CaseIterable { case foreground, inactive, background }
    /// UNAuthorizationStatus, reduced to what changes behaviour.
    public enum NotificationPermission: String, Sendable, CaseIterable {
        case authorized, provisional, denied, notDetermined
        var canPost: Bool { self == .authorized || self == .provisional }
    }
    public enum ConnectionType: String, Sendable, CaseIterable { case wifi, cellular, wired, unknown }

    public var phase: Phase = .foreground
    public var lowPowerMode = false
    public var networkConnected = true
    public var networkType: ConnectionType = .unknown
    public var notificationPermission: NotificationPermission = .authorized
    /// ActivityAuthorizationInfo().areActivitiesEnabled
    public var liveActivitiesPermitted = true
    /// The device whose app last reported its state (`app.update`): the one
    /// that shows the Live Activity and the notifications.
    public var device: String?

    public init() {}

    /// `inactive` is the transition while the app is still on screen, so only
    /// `background` counts as "away" for the notification table.
    public var isBackground: Bool { phase == .background }
}

/// A partial update of AppState (`app.update`): nil fields stay as they are.
public struct AppUpdate: Equatable, Sendable {
    public var phase: AppState.Phase?
    public var lowPowerMode: Bool?
    public var networkConnected: Bool?
    public var networkType: AppState.ConnectionType?
    public var notificationPermission: AppState.NotificationPermission?
    public var liveActivitiesPermitted: Bool?
    /// The OS ended our background time (BACKGROUND-TASKS handleTaskExpiration).
    public var backgroundTimeExpired: Bool = false
    /// The device sending the update (the connection's initialize deviceId).
    public var deviceId: String?
    public init(phase: AppState.Phase? = nil, lowPowerMode: Bool? = nil, networkConnected: Bool? = nil,
                networkType: AppState.ConnectionType? = nil,
                notificationPermission: AppState.NotificationPermission? = nil,
                liveActivitiesPermitted: Bool? = nil, backgroundTimeExpired: Bool = false, deviceId: String? = nil) {
        self.phase = phase
        self.lowPowerMode = lowPowerMode
        self.networkConnected = networkConnected
        self.networkType = networkType
        self.notificationPermission = notificationPermission
        self.liveActivitiesPermitted = liveActivitiesPermitted
        self.backgroundTimeExpired = backgroundTimeExpired
        self.deviceId = deviceId
    }
}
