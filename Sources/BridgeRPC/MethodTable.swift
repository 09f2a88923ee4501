import BridgeCore

/// Who is calling: the connection a request came in on and its device.
public struct RPCContext {
    public var connectionID: Int
    /// The `initialize` deviceId, or for a socket client that gave none the
    /// one generated for this connection.
    public var deviceID: String?
    /// The client named its device. A generated id changes with every
    /// connection, so it cannot say which device acts (hand-off).
    public var deviceIsNamed: Bool
    public init(connectionID: Int, deviceID: String? = nil, deviceIsNamed: Bool = true) {
        self.connectionID = connectionID
        self.deviceID = deviceID
        self.deviceIsNamed = deviceIsNamed
    }
    /// The device to tell the engine about: only a named one.
    public var namedDevice: String? { deviceIsNamed ? deviceID : nil }
}

/// Completes a request that a handler answers later (an approval a person
/// decides minutes from now). Must be called exactly once, on the loop thread.
public typealias RPCReply = (Result<JSON, RPCError>) -> Void

/// The method registry. Each area registers its methods in a file of its own
/// (`Methods/<Area>.swift`); the server only looks names up here.
public final class MethodTable {
    public enum Handler {
        case sync((Params, RPCContext) throws -> JSON)
        case async((Params, RPCContext, @escaping RPCReply) throws -> Void)
    }

    public private(set) var handlers: [String: Handler] = [:]

    public init() {}

    /// A handler that answers on return (or throws an RPCError).
    public func on(_ method: String, _ body: @escaping (Params, RPCContext) throws -> JSON) {
        precondition(handlers[method] == nil, "method \(method) registered twice")
        if let d = syncReplyDeferral, d.methods.contains(method) {
            let later = d.deferReply
            handlers[method] = .async { p, ctx, reply in
                let result = try body(p, ctx)
                later { reply(.success(result)) }
            }
            return
        }
        handlers[method] = .sync(body)
    }

    /// Set before the methods are registered: the replies of these sync
    /// methods go out through `deferReply` (continuity: after the loop turn's
    /// store commit, so an answered event survives kill -9).
    public var syncReplyDeferral: (methods: Set<String>, deferReply: (@escaping () -> Void) -> Void)?

    /// A handler that answers later through `reply`. Throwing before calling
    /// `reply` answers with the thrown error.
    public func onAsync(_ method: String, _ body: @escaping (Params, RPCContext, @escaping RPCReply) throws -> Void) {
        precondition(handlers[method] == nil, "method \(method) registered twice")
        handlers[method] = .async(body)
    }

    public var methodNames: [String] { handlers.keys.sorted() }
}
