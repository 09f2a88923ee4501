import BridgeCore
import BridgeEngine

/// The JSON-RPC server: lifecycle, built-in methods, and dispatch into the
/// MethodTable. Transport, framing and envelope rules live in C (CBridge);
/// `ping` and `rpc.discover` are answered there without entering Swift.
///
/// Lifecycle (process-wide, as in LSP): before `initialize` only `initialize`,
/// `ping`, `rpc.discover` and `exit` work (others: -32002); after `shutdown`
/// only `exit`, `ping` and `rpc.discover` (others: -32600). `exit` ends the
/// process with 0 after `shutdown`, else 1. EOF on input, SIGTERM or SIGINT:
/// queued output is flushed and the process exits with 0.
/// Unix-socket clients (`listen(unixPath:)`, Listen.swift) each have their own
/// lifecycle instead; with a listener, EOF on stdin does not stop the server.
public final class RPCServer {
    public enum Phase: Sendable { case awaitingInitialize, running, shuttingDown, stopped }

    public static let protocolVersion = "1.0"
    public static let serverName = "codingbridge"
    /// Methods the server itself implements (never in the MethodTable).
    public static let builtins = ["initialize", "initialized", "shutdown", "exit", "ping", "rpc.discover"]

    public let env: ServerEnvironment
    public let methods: MethodTable
    public let endpoint: RPCEndpoint
    public private(set) var phase: Phase = .awaitingInitialize
    /// Set when the server decided to stop; what `serveStdio` returns.
    public private(set) var exitCode: Int32?
    var stopping = false
    var stdio: RPCConnection?
    /// Unix-socket listeners and their clients (Listen.swift).
    public let sockets = SocketClients()
    /// What was broadcast before the first client (Listen.swift `send`).
    var held = HeldNotifications()

    public init(env: ServerEnvironment, methods: MethodTable? = nil) throws {
        self.env = env
        Log.level = env.options.logLevel
        var limits = TransportLimits()
        limits.maxMessageBytes = env.options.maxMessageBytes
        endpoint = RPCEndpoint(loop: env.loop, limits: limits)
        self.methods = methods ?? MethodTable()
        // Before registering: recovery fires the deadlines that passed while
        // the process was down, and what they send must be held, not lost.
        env.send = { [weak self] audience, method, params in self?.send(method, params, to: audience) }
        if methods == nil { try self.methods.registerAll(env) }
        for name in Self.builtins where self.methods.handlers[name] != nil {
            throw RPCError.internalError("method \(name) is built into the server")
        }
        // The answers that never change are spliced into replies in C.
        endpoint.setStaticResult("ping", json: "{}")
        endpoint.setStaticResult("rpc.discover", json: OpenRPCDocument.text)
        endpoint.onCall = { [unowned self] call in self.handle(call) }
        endpoint.onPeerGone = { [unowned self] conn in
            Log.debug("connection \(conn.id): peer gone")
            if conn === self.stdio && self.sockets.listeners.isEmpty { self.stop(exitCode: 0, reason: "end of input") }
            else { self.peerGone(conn) }
        }
        // weak: the endpoint's deinit closes what is left after the server is gone.
        endpoint.onClosed = { [weak self] conn in
            guard let self, !self.stopping else { return }
            for hook in self.env.onConnectionClosed { hook(conn.id) }
        }
        endpoint.onSignal = { [unowned self] sig in
            if self.stopping {
                // a second signal: the user does not want to wait for the flush
                Log.warn("second signal while stopping: exiting without flushing")
                self.finishStop()
                return
            }
            self.stop(exitCode: 0, reason: sig == 15 ? "SIGTERM" : "SIGINT")
        }
    }

    /// Serves stdin/stdout until exit, EOF or a signal; returns the exit code.
    public func serveStdio() throws -> Int32 {
        endpoint.watchSignals()
        stdio = try endpoint.openStdio()
        Log.debug("serving on stdio")
        env.loop.run()
        return exitCode ?? 0
    }

    /// Sends a notification to every connection that completed `initialize`.
    public func broadcast(_ method: String, _ params: JSON) {
        send(method, params, to: .all)
    }

    /// An in-process client: bytes in, replies out, no pipes (fuzzers,
    /// benchmarks, unit tests). Its calls take the same path as stdio's.
    public func makeInProcessClient() -> InProcessClient {
        InProcessClient(server: self, connection: endpoint.openInMemory())
    }

    /// How long `stop` waits for peers to take their queued output.
    public var flushTimeoutMs: UInt64 = 5000
    private var finished = false

    /// Stops serving: flush every connection (for at most `flushTimeoutMs`: a
    /// peer that never reads cannot hold the process), run the exit hooks,
    /// stop the loop.
    public func stop(exitCode code: Int32, reason: String) {
        guard !stopping else { return }
        stopping = true
        exitCode = code
        phase = .stopped
        Log.debug("stopping (\(reason)), exit code \(code)")
        closeListeners()
        var open = endpoint.allConnections.count
        if open == 0 { finishStop(); return }
        let cancel = endpoint.after(ms: flushTimeoutMs) { [weak self] in
            Log.warn("output not taken by the client within \(self?.flushTimeoutMs ?? 0) ms; exiting anyway")
            self?.finishStop()
        }
        for c in endpoint.allConnections {
            c.close { [weak self] in
                open -= 1
                if open == 0 { cancel(); self?.finishStop() }
            }
        }
    }

    private func finishStop() {
        guard !finished else { return }
        finished = true
        for hook in env.onExit { hook() }
        env.loop.stop()
    }

    // MARK: dispatch

    private func handle(_ call: RPCCall) {
        if call.connection.isSocket { return handleSocketClient(call) }
        switch call.method {
        case "initialize": initialize(call)
        case "initialized":
            call.responder?.result(.null)
        case "shutdown":
            if phase == .awaitingInitialize { return notInitialized(call) }
            phase = .shuttingDown
            call.responder?.result(.null)
        case "exit":
            call.responder?.result(.null)
            stop(exitCode: phase == .shuttingDown ? 0 : 1, reason: "exit")
        default:
            switch phase {
            case .awaitingInitialize: return notInitialized(call)
            case .shuttingDown, .stopped:
                return invalidRequest(call, "the server is shutting down")
            case .running: break
            }
            dispatch(call)
        }
    }

    /// -32600 for a call the lifecycle does not allow now.
    func invalidRequest(_ call: RPCCall, _ reason: String) {
        call.responder?.error(code: RPCError.invalidRequestCode, message: "Invalid Request",
                              data: ["reason": .string(reason), "method": .string(call.method)])
    }

    func notInitialized(_ call: RPCCall) {
        call.responder?.error(code: RPCError.notInitializedCode, message: "Server not initialized",
                              data: ["reason": "send initialize first", "method": .string(call.method)])
    }

    func context(_ c: RPCConnection) -> RPCContext {
        RPCContext(connectionID: c.id, deviceID: c.userInfo["deviceId"] as? String,
                   deviceIsNamed: c.userInfo["deviceIdGenerated"] == nil)
    }

    func dispatch(_ call: RPCCall) {
        guard let handler = methods.handlers[call.method] else {
            let e = RPCError.methodNotFound(call.method)
            call.responder?.error(code: e.code, message: e.message, data: e.data)
            return
        }
        let responder = call.responder
        do {
            let params = try Params(call.params)
            let ctx = context(call.connection)
            switch handler {
            case .sync(let body):
                let result = try body(params, ctx)
                responder?.result(result)
            case .async(let body):
                try body(params, ctx) { outcome in
                    switch outcome {
                    case .success(let r): responder?.result(r)
                    case .failure(let e): responder?.error(code: e.code, message: e.message, data: e.data)
                    }
                }
            }
        } catch let e as RPCError {
            if responder == nil { Log.debug("notification \(call.method) failed: \(e.message)") }
            responder?.error(code: e.code, message: e.message, data: e.data)
        } catch {
            Log.error("\(call.method): \(error)")
            let e = RPCError.internalError(String(describing: error))
            responder?.error(code: e.code, message: e.message, data: e.data)
        }
    }

    func initialize(_ call: RPCCall) {
        guard let responder = call.responder else { return } // a notification cannot initialize
        let client = sockets.state(call.connection) // nil: stdio/in-memory, lifecycle process-wide
        if client.map({ $0.phase != .awaitingInitialize }) ?? (phase != .awaitingInitialize) {
            return responder.error(code: RPCError.invalidRequestCode, message: "Invalid Request",
                                   data: ["reason": "initialize was already received"])
        }
        do {
            let p = try Params(call.params)
            if let info = try p.optional("clientInfo", as: [String: JSON].self), let n = info["name"], n.stringValue == nil {
                throw RPCError.invalidParams("invalid params: 'clientInfo.name' must be string",
                                             data: ["param": "clientInfo.name", "expected": "string", "got": .string(n.typeName)])
            }
            let caps = try p.optional("capabilities", as: [String: JSON].self)
            let notifications = caps?["notifications"] ?? .bool(true)
            guard let wantsNotifications = notifications.boolValue else {
                throw RPCError.invalidParams("invalid params: 'capabilities.notifications' must be boolean",
                                             data: ["param": "capabilities.notifications", "expected": "boolean",
                                                    "got": .string(notifications.typeName)])
            }
            if let device = try p.optional("deviceId", as: String.self) {
                guard !device.isEmpty else {
                    throw RPCError.invalidParams("invalid params: 'deviceId' must not be empty",
                                                 data: ["param": "deviceId", "expected": "non-empty string", "got": ""])
                }
                call.connection.userInfo["deviceId"] = device
            } else if let client {
                call.connection.userInfo["deviceId"] = client.generatedDeviceID
                call.connection.userInfo["deviceIdGenerated"] = true
            }
            if let client { client.phase = .running } else { phase = .running }
            // A client that only calls (the hook) is left out of notifications.
            if wantsNotifications { call.connection.userInfo["receivesNotifications"] = true }
            let methodNames = (Self.builtins + methods.methodNames).sorted()
            var result: [String: JSON] = [
                "serverInfo": ["name": .string(Self.serverName), "version": .string(BridgeEngineVersion.value)],
                "protocolVersion": .string(Self.protocolVersion),
                "capabilities": [
                    "methods": .array(methodNames.map { .string($0) }),
                    "framing": .string(call.connection.framing.rawValue),
                    "batch": true,
                    "maxMessageBytes": .int(Int64(env.options.maxMessageBytes)),
                    "manualClock": .bool(env.options.manualClock),
                ],
                "recovered": env.recovered(),
            ]
            if let d = call.connection.userInfo["deviceId"] as? String { result["deviceId"] = .string(d) }
            responder.result(.object(result))
            if wantsNotifications, let waiting = held.take() {
                for n in waiting { send(n.method, n.params, to: .connection(call.connection.id)) }
            }
        } catch let e as RPCError {
            responder.error(code: e.code, message: e.message, data: e.data)
        } catch {
            responder.error(code: RPCError.internalErrorCode, message: "Internal error", data: ["detail": .string("\(error)")])
        }
    }
}

/// Drives the server from inside the process: feed raw bytes (any framing),
/// read back what the server wrote. Async replies appear in `takeOutput()`
/// once their handler answers.
public final class InProcessClient {
    public let connection: RPCConnection
    /// Keeps the server (and so the connection) alive as long as the client.
    public let server: RPCServer
    private var nextID: Int64 = 1

    init(server: RPCServer, connection: RPCConnection) {
        self.server = server
        self.connection = connection
    }

    /// A client that goes away closes its connection, so a fuzzer may make
    /// one per input without the server accumulating connections.
    deinit { connection.close() }

    /// Feeds raw bytes and returns everything written back so far.
    @discardableResult
    public func send(raw bytes: [UInt8]) -> [UInt8] {
        connection.feed(bytes)
        return connection.takeOutput()
    }
    /// Feeds raw text and returns the text written back so far.
    public func send(_ text: String) -> String {
        connection.feed(text)
        return String(decoding: connection.takeOutput(), as: UTF8.self)
    }
    /// Sends one request (NDJSON) and returns the parsed reply messages written back.
    public func request(_ method: String, _ params: JSON? = nil) -> [JSON] {
        var msg: [String: JSON] = ["jsonrpc": "2.0", "method": .string(method), "id": .int(nextID)]
        nextID += 1
        if let params { msg["params"] = params }
        return messages(send(JSON.object(msg).serialized() + "\n"))
    }
    /// Sends one notification (NDJSON); returns any messages written back.
    public func notify(_ method: String, _ params: JSON? = nil) -> [JSON] {
        var msg: [String: JSON] = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { msg["params"] = params }
        return messages(send(JSON.object(msg).serialized() + "\n"))
    }
    /// Output produced since the last call (e.g. async replies, notifications).
    public func takeOutput() -> String { String(decoding: connection.takeOutput(), as: UTF8.self) }
    /// Discards output, returning its size (benchmarks).
    public func discardOutput() -> Int { connection.discardOutput() }
    /// The peer closed its side.
    public func sendEOF() { connection.feedEOF() }

    /// Splits NDJSON output into messages.
    public func messages(_ text: String) -> [JSON] {
        text.split(separator: "\n").compactMap { JSON.parse(String($0)) }
    }
}
