import BridgeCore

/// Options the `serve` command passes to the server.
public struct ServerOptions {
    public var maxMessageBytes: Int = 16 << 20
    /// Time advances only through `debug.advanceClock` (tests, demos).
    public var manualClock: Bool = false
    /// The wall-clock time (Unix ms) a manual clock starts at (a restart
    /// "later" in tests: `--manual-clock-start`).
    public var manualClockStartMs: Int64 = TimeoutScheduler.defaultManualEpochMs
    /// nil: $XDG_STATE_HOME/codingbridge, else ~/.local/state/codingbridge.
    public var stateDirectory: String? = nil
    /// Keep durable state in memory only.
    public var ephemeral: Bool = false
    /// stderr verbosity (`--log-level`).
    public var logLevel: LogLevel = .info
    /// APNs (`--apns-key` ...); nil: from `<state dir>/push.json`, else none.
    public var apns: APNsConfig? = nil
    /// Web Push's VAPID subject (mailto: or https:); nil: no Web Push.
    public var vapidSubject: String? = nil
    /// Trust this CA for Web Push services (a test service).
    public var webPushCAFile: String? = nil
    /// Live Activity progress pushes: at most one per this many ms per activity.
    public var pushCoalesceMs: Int64 = 5_000
    /// A hook's PermissionRequest waits even when nobody can answer it
    /// (`--always-wait-for-approval`); by default it is answered at once
    /// with no decision (`decision: "noAnswerer"`).
    public var alwaysWaitForApproval = false
    /// What resumes an ended Claude Code session with a message from a
    /// device (`--resume-command`, run as `CMD --resume=ID -p -- TEXT`); nil: never.
    public var resumeCommand: String? = "claude"
    public init() {}
}

/// The services of one server, shared by its methods and its pipeline.
/// Created empty; `start()` (Startup.swift) opens the store and recovers,
/// in one visible sequence, before any client is served.
public final class ServerEnvironment {
    public let loop: EventLoop
    public let options: ServerOptions
    public let log: Logger
    /// Every timeout (approvals, reminders, retries) on one loop timer; a
    /// manual clock under `--manual-clock`, advanced by `debug.advanceClock`.
    public let scheduler: TimeoutScheduler
    /// The connections and which notification reaches which.
    public let router: NotificationRouter
    /// Every reply leaves after the commit of what was written before it.
    let barrier = ReplyBarrier()
    /// The durable store (outbox, drafts, key-value snapshots), opened by `start()`.
    public private(set) var store: Store?
    /// The redaction engine every surface text goes through (built-in catalog
    /// plus the custom rules of the settings).
    public internal(set) var redactor: Redactor = .builtIn
    /// The engine (sessions, approvals, notifications), on `scheduler`'s clock.
    public private(set) lazy var engine = EngineHost(env: self)
    /// Hook requests waiting for their approval to resolve.
    let waiters: HookWaiters
    /// What an http hook must show (`HookToken`); set by `start()` from the
    /// state directory (--ephemeral: a fresh one nobody else knows). nil:
    /// no http hook is accepted.
    public internal(set) var hookToken: HookToken?
    /// Set by `start()`: engine snapshots (not with --ephemeral), the
    /// outbox's delivery, decisions queued while the backend link is down.
    var snapshots: SnapshotWriter?
    var outbox: OutboxDelivery?
    /// Messages from devices into Claude Code sessions (Stop hook, resume).
    var inbox: AgentInbox?
    var decisions: OfflineDecisions?
    /// Paired devices and pairing codes, and the audit log; set by `start()`.
    var devices: DeviceRegistry?
    var audit: AuditLog?
    /// Push registrations and the push queue; set by `start()`.
    var push: PushService?
    /// Failed pairing and authentication attempts per source host.
    let failures = FailureLimiter()
    /// The call being handled (its connection's kind, address and device),
    /// for the audit entries of what it causes; nil outside a call.
    var caller: RPCContext?
    /// What `start()` reopened, reported by `initialize` as `recovered`.
    public internal(set) var recovered: JSON = .object([:])

    public init(loop: EventLoop, options: ServerOptions) {
        self.loop = loop
        self.options = options
        self.log = Logger(level: options.logLevel)
        self.router = NotificationRouter(log: log)
        self.waiters = HookWaiters(log: log)
        self.scheduler = TimeoutScheduler(loop: loop, clock: options.manualClock ? .manual : .system,
                                          manualEpochMs: options.manualClockStartMs)
    }

    /// Why nobody could answer a question or approval the call `ctx` asks
    /// (nil: someone can, or `--always-wait-for-approval`).
    func noAnswerer(for ctx: RPCContext) -> String? {
        options.alwaysWaitForApproval ? nil : nobodyCanAnswer(except: ctx.connectionID)
    }

    /// Whether someone could answer an approval asked on `connection` (a
    /// hook's own connection, or an http hook's key): another open client
    /// that completed `initialize` and takes notifications, or a device with
    /// a push registration. nil: someone can; else why nobody can.
    private func nobodyCanAnswer(except connection: Int) -> String? {
        if router.all.contains(where: { $0.id != connection && $0.receivesNotifications && $0.io.isOpen }) { return nil }
        if push?.registry.all.contains(where: { !$0.ended }) == true { return nil }
        return "nobody can answer: no client connected and no push registration"
    }

    /// Sends a notification to the initialized clients `audience` selects.
    public func send(_ audience: Audience, _ method: String, _ params: JSON) {
        router.send(method, params, to: audience)
    }

    /// Sends a server->client notification to every initialized client.
    public func broadcast(_ method: String, _ params: JSON) { router.send(method, params, to: .all) }

    func attach(_ store: Store) {
        self.store = store
        barrier.store = store
    }

    /// Writes what is still pending (the last snapshot) and commits; the
    /// server calls it once, when it stops.
    func finish() { store?.flush() }
}
