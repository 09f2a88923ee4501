import BridgeCore

/// The lifecycle of LSP, one state machine for every connection. Before
/// `initialize` only `initialize`, `ping`, `rpc.discover` and `exit` work
/// (others: -32002); after `shutdown` only `exit`, `ping` and `rpc.discover`
/// (others: -32600). stdio and in-process clients share the process's
/// lifecycle, where `exit` ends the process (0 after `shutdown`, else 1); a
/// socket client has its own, where `exit` closes that client only.
public final class Lifecycle {
    public enum Phase: Sendable { case awaitingInitialize, running, shuttingDown, stopped }

    public internal(set) var phase: Phase = .awaitingInitialize
    /// `exit` ends the process (the stdio lifecycle), not just the connection.
    public let endsProcess: Bool

    init(endsProcess: Bool) { self.endsProcess = endsProcess }

    /// What a call may do in the current phase.
    enum Gate { case allowed, notInitialized, refused(String) }

    func gate() -> Gate {
        switch phase {
        case .awaitingInitialize: return .notInitialized
        case .running: return .allowed
        case .shuttingDown, .stopped:
            return .refused(endsProcess ? "the server is shutting down" : "this client sent shutdown")
        }
    }
}

/// A client that reached the daemon over the network: where from, and what
/// its upgrade request carried. Such a client is not trusted as the local
/// user is: it must authenticate as a paired device first.
public struct RemotePeer: Sendable {
    /// "192.0.2.1:51234" or "[::1]:51234"
    public var address: String
    /// The token of an `Authorization: Bearer` header on the upgrade request.
    public var bearerToken: String?
    public init(address: String, bearerToken: String? = nil) {
        self.address = address
        self.bearerToken = bearerToken
    }
}

/// One client, whatever carries its bytes: typed state the server keeps about
/// it. The transport (framing, output queue, slow-reader accounting) is C's.
public final class Connection {
    public let io: RPCConnection
    public let lifecycle: Lifecycle
    /// Set for a network client (nil: stdio, unix socket, in-process).
    public let remote: RemotePeer?
    /// The `initialize` deviceId; for a socket client that gave none, one
    /// generated for this connection (`deviceIsNamed` false).
    public private(set) var deviceID: String?
    public private(set) var deviceIsNamed = true
    /// Completed `initialize` without `capabilities.notifications: false`
    /// (the hook only calls, and never gets any).
    public internal(set) var receivesNotifications = false
    /// The paired device a network client authenticated as (its token).
    public private(set) var pairedDevice: String?
    /// Calls refused as unauthorized and wrong codes or tokens: the third
    /// closes a network connection (`DeviceAuth.maxFailures`).
    var failedAttempts = 0
    /// Slow-client policy: output taken at the last check, and since when
    /// nothing was taken while over the limit.
    var lastWritten: UInt64 = 0
    var stalledSinceMs: UInt64?

    init(_ io: RPCConnection, lifecycle: Lifecycle, remote: RemotePeer? = nil) {
        self.io = io
        self.lifecycle = lifecycle
        self.remote = remote
    }

    public var id: Int { io.id }
    public var transport: TransportKind { io.transport }
    public var framing: Framing { io.framing }

    /// A network client that has not authenticated as a paired device yet.
    var needsAuth: Bool { remote != nil && pairedDevice == nil }

    /// Who is calling, for the handlers.
    var context: RPCContext {
        var ctx = RPCContext(connectionID: id, deviceID: deviceID, deviceIsNamed: deviceIsNamed)
        ctx.transport = transport.name
        ctx.address = remote?.address
        ctx.pairedDevice = pairedDevice
        return ctx
    }

    /// The client proved it holds the token of paired device `device`: that
    /// is its device from now on, whatever it names in its params.
    func authenticate(as device: String) {
        pairedDevice = device
        deviceID = device
        deviceIsNamed = true
    }

    /// Records the device `initialize` named, or makes one up for a socket
    /// client (a generated id changes with every connection, so it never
    /// says which device acts).
    func identify(device: String?) {
        if pairedDevice != nil { return }
        if let device {
            deviceID = device
        } else if !lifecycle.endsProcess {
            deviceID = "device-" + String(UInt32.random(in: .min ... .max), radix: 16)
            deviceIsNamed = false
        }
    }
}

/// Who is calling: the connection a request came in on and its device.
public struct RPCContext {
    public var connectionID: Int
    /// The `initialize` deviceId, or for a socket client that gave none the
    /// one generated for this connection.
    public var deviceID: String?
    /// The client named its device. A generated id changes with every
    /// connection, so it cannot say which device acts (hand-off).
    public var deviceIsNamed: Bool
    /// The connection's kind (stdio, socket, memory, webSocket), for the audit log.
    public var transport: String?
    /// The peer's address, for a network client only.
    public var address: String?
    /// Set when a network client authenticated as a paired device: it may
    /// act as that device only.
    public var pairedDevice: String?
    /// A local client (stdio, unix socket, in-process), trusted as the user.
    public var isTrusted: Bool { address == nil }
    public init(connectionID: Int, deviceID: String? = nil, deviceIsNamed: Bool = true) {
        self.connectionID = connectionID
        self.deviceID = deviceID
        self.deviceIsNamed = deviceIsNamed
    }
    /// The device to tell the engine about: only a named one.
    public var namedDevice: String? { deviceIsNamed ? deviceID : nil }
}

extension TransportKind {
    /// The name the audit log and `device.list` use.
    public var name: String {
        switch self {
        case .stdio: return "stdio"
        case .socket: return "socket"
        case .memory: return "memory"
        case .webSocket: return "webSocket"
        }
    }
}
