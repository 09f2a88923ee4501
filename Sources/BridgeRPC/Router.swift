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

/// What happens to a client (any transport) that does not read what it is sent.
///
/// 1. Its replies queue in memory; above the transport's high-water mark
///    (4 MiB) the server stops reading its requests until it drains (it is
///    throttled; nobody else waits for it: every client has its own queue).
/// 2. While more than `notifyLimitBytes` are unread, notifications meant for
///    it are dropped (and counted, in the transport), so broadcasts cannot
///    grow its queue.
/// 3. If it stays above `notifyLimitBytes` without taking a single byte for
///    `stallTimeoutMs`, it is disconnected: its unsent output is discarded and
///    its pending requests are dropped (an async answer to it goes nowhere).
///    For stdio that is the end of input: the process stops as on EOF.
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
/// with every client gone, notifications go nowhere. Bounded: past `limit`
/// the oldest go (logged).
struct HeldNotifications {
    static let limit = 1_000
    private var items: [(method: String, params: JSON)] = []
    private(set) var dropped = 0
    private(set) var isOpen = true

    mutating func keep(_ method: String, _ params: JSON) {
        if items.count == Self.limit { items.removeFirst(); dropped += 1 }
        items.append((method, params))
    }

    /// What was held, once; nil after the first call.
    mutating func take() -> [(method: String, params: JSON)]? {
        guard isOpen else { return nil }
        defer { items = []; isOpen = false }
        return items
    }
}

/// The connections and which of them gets which notification: the engine's
/// effects, outbox deliveries, anything broadcast. One output policy for
/// every transport (`SlowClientPolicy`).
public final class NotificationRouter {
    private var connections: [Int: Connection] = [:]
    private var held = HeldNotifications()
    let log: Logger
    public internal(set) var policy = SlowClientPolicy()
    /// Clients disconnected by the slow-client policy.
    public internal(set) var droppedClients: UInt64 = 0
    /// Notifications not sent to a client because of the policy.
    public internal(set) var droppedNotifications: UInt64 = 0

    init(log: Logger) { self.log = log }

    /// Every open connection, oldest first.
    public var all: [Connection] { connections.keys.sorted().compactMap { connections[$0] } }
    public func connection(_ id: Int) -> Connection? { connections[id] }
    func add(_ c: Connection) { connections[c.id] = c }
    func remove(_ id: Int) { connections[id] = nil }

    /// Sends a notification to the initialized clients `audience` selects,
    /// serialised once however many get it. Before the first client (a
    /// restart firing the deadlines that passed while it was down), what is
    /// for everyone waits for it.
    public func send(_ method: String, _ params: JSON, to audience: Audience) {
        if audience == .all, held.isOpen, !connections.values.contains(where: \.receivesNotifications) {
            held.keep(method, params)
            return
        }
        var bytes: [UInt8] = []
        for c in connections.values where c.receivesNotifications && audience.includes(connection: c.id) {
            if bytes.isEmpty { bytes = Self.serialize(method, params) }
            if !c.io.sendNotification(serialized: bytes), c.io.isOpen {
                droppedNotifications += 1
                log.debug("notification \(method) to slow client \(c.id) dropped (\(c.io.queuedBytes) bytes unread)")
            }
        }
    }

    private static func serialize(_ method: String, _ params: JSON) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        bytes.append(contentsOf: #"{"jsonrpc":"2.0","method":"#.utf8)
        JSON.string(method).encode(into: &bytes)
        bytes.append(contentsOf: #","params":"#.utf8)
        params.encode(into: &bytes)
        bytes.append(0x7D)
        return bytes
    }

    /// What was held for the first client that takes notifications, sent to
    /// `c` right after its `initialize` reply.
    func releaseHeld(to c: Connection) {
        guard c.receivesNotifications, let waiting = held.take() else { return }
        if held.dropped > 0 {
            log.warn("\(held.dropped) notification(s) from before the first client were dropped (over \(HeldNotifications.limit))")
        }
        for n in waiting { send(n.method, n.params, to: .connection(c.id)) }
    }

    /// Disconnects clients over the notify limit that took nothing for the
    /// stall timeout (see `SlowClientPolicy`). In-process clients take their
    /// output when their owner asks, so they are never stalled.
    func checkSlowClients(nowMs now: UInt64) {
        for c in connections.values where !c.io.isClosed && c.transport != .memory {
            let written = c.io.bytesWritten
            defer { c.lastWritten = written }
            guard c.io.queuedBytes > policy.notifyLimitBytes && written == c.lastWritten else {
                c.stalledSinceMs = nil
                continue
            }
            guard let since = c.stalledSinceMs else { c.stalledSinceMs = now; continue }
            guard now - since >= policy.stallTimeoutMs else { continue }
            log.warn("client \(c.id) (\(c.deviceID ?? "no device")) took nothing of \(c.io.queuedBytes) queued bytes "
                     + "for \(now - since) ms: disconnected")
            droppedClients += 1
            c.io.abort()
        }
    }
}
