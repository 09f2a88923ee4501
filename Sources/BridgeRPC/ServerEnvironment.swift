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
    public init() {}
}

/// The shared services every method group reaches. One instance per server,
/// created before any method is registered; each area adds its service here.
public final class ServerEnvironment {
    public let loop: EventLoop
    public let options: ServerOptions
    /// Every timeout (approvals, reminders, retries) on one loop timer; a
    /// manual clock under `--manual-clock`, advanced by `debug.advanceClock`.
    public let scheduler: TimeoutScheduler
    /// The durable store (outbox, drafts, key-value snapshots); opened by
    /// `openStore()` (Methods/Outbox.swift) from `options`.
    public var store: Store?
    /// Sends a notification to some of the clients: all or one connection
    /// (see `Audience`). The server sets it before its methods register, since
    /// recovery already sends.
    public var send: (_ audience: Audience, _ method: String, _ params: JSON) -> Void = { _, _, _ in }
    /// Sends a server->client notification to every initialized client.
    public func broadcast(_ method: String, _ params: JSON) { send(.all, method, params) }
    /// What the server reopened from durable state, reported in `initialize`'s
    /// `recovered` (the store/engine set this; default: nothing recovered).
    public var recovered: () -> JSON = { .object([:]) }
    /// The redaction engine every surface text goes through (built-in catalog;
    /// the settings layer replaces it when custom rules change).
    public var redactor: Redactor = .builtIn
    /// The engine (sessions, approvals, notifications), on `scheduler`'s clock.
    public lazy var engine = EngineHost(env: self)
    /// Run once after recovery restored the state directory and fired what
    /// came due while down (registerContinuity), before any client is served.
    public var afterRecovery: [() -> Void] = []
    /// Called with the new state after `connection.update` (continuity's retry policy).
    public var onConnectionUpdate: [(String) -> Void] = []
    /// Called once with a connection's id (`RPCContext.connectionID`) when a
    /// socket, stdio or in-process connection goes away while the server is
    /// serving (EOF, error, slow-client drop, `exit`); not for the connections
    /// the server itself closes when it stops.
    public var onConnectionClosed: [(Int) -> Void] = []
    /// Run once when the server stops (exit, EOF, signal), after output is flushed.
    public var onExit: [() -> Void] = []

    public init(loop: EventLoop, options: ServerOptions) {
        self.loop = loop
        self.options = options
        self.scheduler = TimeoutScheduler(loop: loop, clock: options.manualClock ? .manual : .system,
                                          manualEpochMs: options.manualClockStartMs)
    }
}
