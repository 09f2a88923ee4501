import BridgeCore

/// Who a server->client notification is for. Clients that have not completed
/// `initialize`, or said `capabilities.notifications: false`, never get any.
public enum Audience: Sendable, Equatable {
    /// Every client (what `env.broadcast` does): all see the same state.
    case all
    /// One connection (`RPCContext.connectionID`): what was held for the first client.
    case connection(Int)

    func includes(connection id: Int) -> Bool {
        switch self {
        case .all: return true
        case .connection(let c): return c == id
        }
    }
}

/// What happens to a unix-socket client that does not read what it is sent.
///
/// 1. Its replies queue in memory; above the transport's high-water mark
///    (4 MiB) the server stops reading its requests until it drains (it is
///    throttled; nobody else waits for it: every client has its own queue).
/// 2. While more than `notifyLimitBytes` are unread, notifications meant for
///    it are dropped (and counted), so broadcasts cannot grow its queue.
/// 3. If it stays above `notifyLimitBytes` without taking a single byte for
///    `stallTimeoutMs`, it is disconnected: its unsent output is discarded and
///    its pending requests are dropped (an async answer to it goes nowhere).
/// So a stuck client costs at most ~4 MiB, for at most the stall timeout.
public struct SlowClientPolicy: Sendable {
    public var notifyLimitBytes: Int = 256 << 10
    public var stallTimeoutMs: UInt64 = 30_000
    public var checkIntervalMs: UInt64 = 1_000
    public init() {}
}

/// Notifications for everyone sent before the first client that takes
/// notifications completed `initialize`: that client gets them right after
/// its reply, so what a restart fires (an expired request's queued decision
/// not sent, a timed-out approval) reaches someone. Only until then: later,
/// with every client gone, notifications go nowhere as before. Bounded: past
/// `limit` the oldest go (logged).
struct HeldNotifications {
    static let limit = 1_000
    private var items: [(method: String, params: JSON)] = []
    private var dropped = 0
    private(set) var isOpen = true

    mutating func keep(_ method: String, _ params: JSON) {
        if items.count == Self.limit { items.removeFirst(); dropped += 1 }
        items.append((method, params))
    }

    /// What was held, once; nil after the first call.
    mutating func take() -> [(method: String, params: JSON)]? {
        guard isOpen else { return nil }
        defer { items = []; isOpen = false }
        if dropped > 0 { Log.warn("\(dropped) notification(s) from before the first client were dropped (over \(Self.limit))") }
        return items
    }
}

/// Lifecycle and slow-reader bookkeeping of one socket client.
final class SocketClient {
    var phase: RPCServer.Phase = .awaitingInitialize
    /// The device id used when `initialize` gives none.
    let generatedDeviceID: String
    var lastWritten: UInt64 = 0
    var stalledSinceMs: UInt64?

    init() {
        generatedDeviceID = "device-" + String(UInt32.random(in: .min ... .max), radix: 16)
    }
}

/// The unix-socket side of a server: its listeners, the slow-client policy
/// and counters.
public final class SocketClients {
    public internal(set) var listeners: [RPCListener] = []
    public var policy = SlowClientPolicy()
    /// Clients disconnected by the slow-client policy.
    public internal(set) var droppedClients: UInt64 = 0
    /// Notifications not sent to a client because of the policy.
    public internal(set) var droppedNotifications: UInt64 = 0
    var watch: LoopTimer?

    func state(_ c: RPCConnection) -> SocketClient? { c.userInfo["socket"] as? SocketClient }
}

extension RPCServer {
    /// Serves on a unix socket at `path` (0600; a dead server's socket is
    /// replaced, a live one refused with a `ListenError`). Each client has its
    /// own lifecycle: `initialize` (deviceId from its params, else a generated
    /// one), `shutdown` and `exit` concern that client only.
    @discardableResult
    public func listen(unixPath path: String) throws -> RPCListener {
        let l = try endpoint.listen(unixPath: path) { [unowned self] conn in self.accepted(conn) }
        sockets.listeners.append(l)
        if sockets.watch == nil {
            sockets.watch = LoopTimer(loop: env.loop, everyMs: sockets.policy.checkIntervalMs) { [unowned self] in
                self.checkSlowClients()
            }
        }
        Log.info("listening on \(path)")
        return l
    }

    /// Serves until `exit` on stdio, a signal, or (without listeners) the end
    /// of stdin; returns the exit code. With listeners, the end of stdin (or
    /// `stdio: false`) leaves the server running for its socket clients.
    public func serve(stdio useStdio: Bool) throws -> Int32 {
        endpoint.watchSignals()
        if useStdio {
            stdio = try endpoint.openStdio()
            Log.debug("serving on stdio")
        }
        if !useStdio && sockets.listeners.isEmpty { throw RPCError.internalError("nothing to serve: no stdio and no listener") }
        env.loop.run()
        return exitCode ?? 0
    }

    /// Sends a notification to the initialized clients `audience` selects.
    /// Serialised once, however many clients get it. Before the first client
    /// (a restart firing the deadlines that passed while it was down), what is
    /// for everyone waits for it (`held`).
    public func send(_ method: String, _ params: JSON, to audience: Audience) {
        var bytes: [UInt8] = []
        if audience == .all, held.isOpen, !endpoint.allConnections.contains(where: { $0.userInfo["receivesNotifications"] != nil }) {
            held.keep(method, params)
            return
        }
        // The transport drops notifications to a slow reader (C, one policy for every connection).
        if endpoint.notifyLimitBytes != sockets.policy.notifyLimitBytes { endpoint.notifyLimitBytes = sockets.policy.notifyLimitBytes }
        for c in endpoint.allConnections where c.userInfo["receivesNotifications"] != nil {
            guard audience.includes(connection: c.id) else { continue }
            guard c.isSocket else {
                if !c.notify(method, params) { Log.debug("notification \(method) to connection \(c.id) dropped") }
                continue
            }
            if bytes.isEmpty {
                bytes.reserveCapacity(256)
                bytes.append(contentsOf: #"{"jsonrpc":"2.0","method":"#.utf8)
                JSON.string(method).encode(into: &bytes)
                bytes.append(contentsOf: #","params":"#.utf8)
                params.encode(into: &bytes)
                bytes.append(0x7D)
            }
            let dropped = c.droppedNotifications
            if !c.sendNotification(serialized: bytes), c.droppedNotifications > dropped {
                sockets.droppedNotifications += 1
                Log.debug("notification \(method) to slow client \(c.id) dropped (\(c.queuedBytes) bytes unread)")
            }
        }
    }

    /// Stops accepting and removes the socket files (on stop).
    public func closeListeners() {
        for l in sockets.listeners { l.close() }
        sockets.listeners = []
        sockets.watch = nil
    }

    /// A peer closed its input or stopped taking output: finish what it can
    /// still take, then close. Stdio with listeners: keep serving the socket.
    func peerGone(_ conn: RPCConnection) {
        if conn === stdio { Log.info("end of stdin; still serving on the socket") }
        conn.close()
    }

    private func accepted(_ conn: RPCConnection) {
        let s = SocketClient()
        conn.userInfo["socket"] = s
        Log.debug("socket client \(conn.id) connected")
    }

    /// The lifecycle of a socket client is its own: the server keeps serving
    /// the others whatever one of them does.
    func handleSocketClient(_ call: RPCCall) {
        guard let client = sockets.state(call.connection) else { return }
        switch call.method {
        case "initialize": initialize(call)
        case "initialized": call.responder?.result(.null)
        case "shutdown":
            if client.phase == .awaitingInitialize { return notInitialized(call) }
            client.phase = .shuttingDown
            call.responder?.result(.null)
        case "exit":
            // this client is done; the process is not
            call.responder?.result(.null)
            client.phase = .stopped
            call.connection.close()
        default:
            switch client.phase {
            case .awaitingInitialize: return notInitialized(call)
            case .shuttingDown, .stopped:
                return invalidRequest(call, "this client sent shutdown")
            case .running: break
            }
            if stopping { return invalidRequest(call, "the server is shutting down") }
            dispatch(call)
        }
    }

    /// Applies the slow-client policy (see `SlowClientPolicy`).
    func checkSlowClients() {
        let now = env.loop.nowMs
        let policy = sockets.policy
        for c in endpoint.allConnections {
            guard let s = sockets.state(c), !c.isClosed else { continue }
            let written = c.bytesWritten
            if c.queuedBytes > policy.notifyLimitBytes && written == s.lastWritten {
                if let since = s.stalledSinceMs {
                    if now - since >= policy.stallTimeoutMs {
                        Log.warn("socket client \(c.id) (\(c.userInfo["deviceId"] as? String ?? "no device")) took nothing of "
                                 + "\(c.queuedBytes) queued bytes for \(now - since) ms: disconnected")
                        sockets.droppedClients += 1
                        c.abort()
                    }
                } else {
                    s.stalledSinceMs = now
                }
            } else {
                s.stalledSinceMs = nil
            }
            s.lastWritten = written
        }
    }
}
