import BridgeCore

/// Completes a request that a handler answers later (an approval a person
/// decides minutes from now). Must be called exactly once, on the loop thread.
/// The server releases it behind the commit barrier like every reply.
public typealias RPCReply = (Result<JSON, RPCError>) -> Void

/// The method registry: names to handlers, nothing else. Each area registers
/// its methods in a file of its own (`Methods/<Area>.swift`); registering
/// does no I/O (startup is `ServerEnvironment.start`), and the server only
/// looks names up here.
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
        handlers[method] = .sync(body)
    }

    /// A handler that answers later through `reply`. Throwing before calling
    /// `reply` answers with the thrown error.
    public func onAsync(_ method: String, _ body: @escaping (Params, RPCContext, @escaping RPCReply) throws -> Void) {
        precondition(handlers[method] == nil, "method \(method) registered twice")
        handlers[method] = .async(body)
    }

    public var methodNames: [String] { handlers.keys.sorted() }

    /// Every method group of the server, over the services `env` started.
    public static func standard(_ env: ServerEnvironment) -> MethodTable {
        let t = MethodTable()
        t.registerRPC(env)
        t.registerTime(env)
        t.registerEngine(env)
        t.registerOutbox(env)
        t.registerRedaction(env)
        t.registerAgents(env)
        t.registerDevices(env)
        t.registerPush(env)
        return t
    }
}
