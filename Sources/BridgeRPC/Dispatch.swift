import BridgeCore
import BridgeEngine

/// Calls: the device gate of a network connection (DeviceAuth.swift), the
/// lifecycle methods, then the gate of the connection's lifecycle, then the
/// MethodTable. Every answer goes through `env.barrier`, sync or async,
/// success or error.
extension RPCServer {
    func handle(_ call: RPCCall) {
        guard let c = env.router.connection(call.connection.id) else {
            call.responder?.error(RPCError.internalError("call on a connection the server does not know"))
            return
        }
        if c.remote != nil, let refusal = deviceGate(call, c) { return refuse(call, c, refusal) }
        let life = c.lifecycle
        switch call.method {
        case "initialize": initialize(call, c)
        // Pairing comes before initialize: it is how a new device gets the token initialize needs.
        case "device.pair" where c.needsAuth: dispatch(call, c)
        case "initialized": answer(call, .success(.null))
        case "shutdown":
            guard life.phase != .awaitingInitialize else { return answer(call, .failure(notInitialized(call))) }
            life.phase = .shuttingDown
            answer(call, .success(.null))
        case "exit":
            answer(call, .success(.null))
            if life.endsProcess { return stop(exitCode: life.phase == .shuttingDown ? 0 : 1, reason: "exit") }
            life.phase = .stopped
            env.barrier.release { _ in c.io.close() }
        default:
            switch life.gate() {
            case .notInitialized: return answer(call, .failure(notInitialized(call)))
            case .refused(let why): return answer(call, .failure(invalidRequest(call, why)))
            case .allowed: break
            }
            if stopping { return answer(call, .failure(invalidRequest(call, "the server is shutting down"))) }
            dispatch(call, c)
        }
    }

    /// Lifecycle answers report no stored state: a failed commit does not
    /// turn them into errors (method results do, see `ReplyBarrier`).
    func answer(_ call: RPCCall, _ outcome: Result<JSON, RPCError>) {
        env.barrier.answer(call.responder, outcome, reportsStoredState: false)
    }

    /// -32600 for a call the lifecycle does not allow now.
    private func invalidRequest(_ call: RPCCall, _ reason: String) -> RPCError {
        RPCError(code: RPCError.invalidRequestCode, message: "Invalid Request",
                 data: ["reason": .string(reason), "method": .string(call.method)])
    }

    private func notInitialized(_ call: RPCCall) -> RPCError {
        RPCError(code: RPCError.notInitializedCode, message: "Server not initialized",
                 data: ["reason": "send initialize first", "method": .string(call.method)])
    }

    private func dispatch(_ call: RPCCall, _ c: Connection) {
        dispatch(call.method, call.params, c.context, to: call.responder, connection: c)
    }

    /// Runs `method` from the table with the caller as `env.caller` (for
    /// the audit entries of what it causes) and answers `responder` behind
    /// the barrier; generic so the JSON-RPC path allocates nothing for it.
    /// A -32001 from a handler (a wrong pairing code, a local-only method)
    /// counts as a failed attempt of the connection.
    func dispatch<T: ReplyTarget>(_ method: String, _ rawParams: JSON?, _ ctx: RPCContext, to responder: T?,
                                  connection c: Connection? = nil) {
        guard let handler = methods.handlers[method] else {
            return finish(responder, c, .failure(.methodNotFound(method)))
        }
        env.caller = ctx
        defer { env.caller = nil }
        do {
            try ParamContract.standard.check(method, rawParams)
            let params = try Params(rawParams)
            switch handler {
            case .sync(let body): finish(responder, c, .success(try body(params, ctx)))
            case .async(let body): try body(params, ctx) { [weak self] in self?.finish(responder, c, $0) }
            }
        } catch let e as RPCError {
            if responder == nil { log.debug("notification \(method) failed: \(e.message)") }
            finish(responder, c, .failure(e))
        } catch {
            log.error("\(method): \(error)")
            finish(responder, c, .failure(.internalError(String(describing: error))))
        }
    }

    private func finish<T: ReplyTarget>(_ responder: T?, _ c: Connection?, _ outcome: Result<JSON, RPCError>) {
        env.barrier.answer(responder, outcome)
        if let c, case .failure(let e) = outcome, e.code == RPCError.unauthorizedCode { countFailure(c, e) }
    }

    private func initialize(_ call: RPCCall, _ c: Connection) {
        guard call.responder != nil else { return } // a notification cannot initialize
        guard c.lifecycle.phase == .awaitingInitialize else {
            return answer(call, .failure(RPCError(code: RPCError.invalidRequestCode, message: "Invalid Request",
                                                  data: ["reason": "initialize was already received"])))
        }
        do {
            try ParamContract.standard.check("initialize", call.params)
            let params = try Params(call.params)
            if c.needsAuth { try authenticate(params, c) }
            let wantsNotifications = try Self.initializeParams(params, c)
            c.lifecycle.phase = .running
            var result: [String: JSON] = [
                "serverInfo": ["name": .string(Self.serverName), "version": .string(BridgeEngineVersion.value)],
                "protocolVersion": .string(Self.protocolVersion),
                "capabilities": [
                    "methods": .array((Self.builtins + methods.methodNames).sorted().map { .string($0) }),
                    "framing": .string(c.framing.rawValue),
                    "batch": true,
                    "maxMessageBytes": .int(Int64(env.options.maxMessageBytes)),
                    "manualClock": .bool(env.options.manualClock),
                ],
                "recovered": env.recovered,
            ]
            if let d = c.deviceID { result["deviceId"] = .string(d) }
            let router = env.router, responder = call.responder, push = env.push
            // Notifications start after the reply, the held ones first.
            env.barrier.release { _ in
                responder?.result(.object(result))
                c.receivesNotifications = wantsNotifications
                router.releaseHeld(to: c)
                if wantsNotifications { push?.deviceConnected(c) }
            }
        } catch let e as RPCError {
            answer(call, .failure(e))
            if e.code == RPCError.unauthorizedCode { countFailure(c, e) }
        } catch {
            answer(call, .failure(.internalError(String(describing: error))))
        }
    }

    /// Checks `initialize`'s params and records the device; whether the
    /// client takes notifications.
    private static func initializeParams(_ p: Params, _ c: Connection) throws -> Bool {
        if let info = try p.optional("clientInfo", as: [String: JSON].self), let n = info["name"], n.stringValue == nil {
            throw RPCError.invalidParams("invalid params: 'clientInfo.name' must be string",
                                         data: ["param": "clientInfo.name", "expected": "string", "got": .string(n.typeName)])
        }
        let caps = try p.optional("capabilities", as: [String: JSON].self)
        let notifications = caps?["notifications"] ?? .bool(true)
        guard let wants = notifications.boolValue else {
            throw RPCError.invalidParams("invalid params: 'capabilities.notifications' must be boolean",
                                         data: ["param": "capabilities.notifications", "expected": "boolean",
                                                "got": .string(notifications.typeName)])
        }
        // An `Id` in the contract: never empty here.
        c.identify(device: try p.optional("deviceId", as: String.self))
        return wants
    }
}
