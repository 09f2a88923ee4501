import BridgeCore

/// An http hook request until its answer. The listener calls `cancel()`
/// when the HTTP client goes away first; a PermissionRequest then ends as
/// when a `codingbridge hook` process's socket closes (the approval is
/// cancelled), and nothing is sent.
public final class HookRequestHandle: ReplyTarget {
    /// Called exactly once, on the loop thread, unless cancelled first:
    /// the status and the body. A 2xx body is "" (no output) or JSON for
    /// Claude Code (the command hook's stdout); an error's is
    /// `{"error":{"message":...}}`, with `code` and `data` when the server
    /// refused the hook input as it refuses an `agent.hook` call.
    public typealias Respond = (_ status: Int, _ body: String) -> Void

    /// The key the request's approval waits under (`HookWaiters`).
    let key: Int
    /// weak: the server's waiters hold this handle while it waits.
    private weak var env: ServerEnvironment?
    private var respond: Respond?
    private var stopBackstop: (() -> Void)?

    init(key: Int, env: ServerEnvironment, respond: @escaping Respond) {
        self.key = key
        self.env = env
        self.respond = respond
    }

    /// A server torn down with the request still waiting: its timer goes too.
    deinit { stopBackstop?() }

    /// The response was sent (or the request cancelled).
    public var isFinished: Bool { respond == nil }

    /// The HTTP client is gone: drop the answer, cancel what it waited for.
    public func cancel() {
        guard take() != nil, let env else { return }
        env.waiters.connectionClosed(key, host: env.engine)
    }

    func result(_ value: JSON) { send(200, ClaudeHookExchange.output(value)) }

    func error(_ e: RPCError) {
        let refused = [RPCError.invalidParamsCode, RPCError.invalidRequestCode, RPCError.parseErrorCode].contains(e.code)
        send(refused ? 400 : 500, Self.errorBody(e.message, code: e.code, data: e.data))
    }

    func send(_ status: Int, _ body: String) { take()?(status, body) }

    /// If nothing answered by `seconds` (the engine's clock is manual, or
    /// stuck), Claude Code gets no output and the approval is cancelled, as
    /// when the command hook gives up at its --timeout and closes its socket.
    func giveUp(afterSeconds seconds: Double, on endpoint: RPCEndpoint) {
        // weak: whoever waits on the request (HookWaiters, the listener)
        // holds the handle; the timer must not keep a server alive.
        stopBackstop = endpoint.after(ms: UInt64(seconds * 1000)) { [weak self] in
            guard let self, let r = take() else { return }
            if let env { env.waiters.connectionClosed(key, host: env.engine, agentLeft: false) }
            r(200, "")
        }
    }

    /// The responder, once; stops the backstop (and so frees this handle).
    private func take() -> Respond? {
        let r = respond
        respond = nil
        stopBackstop?()
        stopBackstop = nil
        return r
    }

    static func errorBody(_ message: String, code: Int? = nil, data: JSON? = nil) -> String {
        var e: [String: JSON] = ["message": .string(message)]
        if let code { e["code"] = .int(Int64(code)) }
        if let data { e["data"] = data }
        return JSON.object(["error": .object(e)]).serialized()
    }
}

extension RPCServer {
    /// Answers a Claude Code http hook (`POST /hooks/claude`) exactly as
    /// `codingbridge hook` answers a command hook: the body goes to
    /// `agent.hook` through the method table and the commit barrier, and
    /// `respond` gets what the command hook would print (a PermissionRequest
    /// once a person decided, or "" when the wait ends). 401 without the
    /// hook token, 400 for a body that is not a JSON object or a bad
    /// timeout, 413 over --max-message-bytes, 503 while stopping.
    ///
    /// `body`: the hook input as posted. `authorization`: the Authorization
    /// header, verbatim. `timeout`: seconds a PermissionRequest may wait,
    /// from the `X-CodingBridge-Timeout` header, else the URL's `?timeout=`,
    /// verbatim (nil: `ClaudeHookExchange.defaultWaitSeconds`). `peer`:
    /// "127.0.0.1:51234", for the log. On the loop thread; `respond` may run
    /// before this returns.
    @discardableResult
    public func handleHookRequest(body: [UInt8], authorization: String?, timeout: String? = nil, peer: String,
                                  respond: @escaping HookRequestHandle.Respond) -> HookRequestHandle {
        let handle = HookRequestHandle(key: env.waiters.newRequestKey(), env: env, respond: respond)
        do {
            let (params, wait) = try hookParams(body: body, authorization: authorization, timeout: timeout)
            log.debug("http hook \(handle.key) from \(peer): \(params["hook_event_name"]?.stringValue ?? "?")")
            handle.giveUp(afterSeconds: wait, on: endpoint)
            // No device: like the command hook, the agent's side never decides.
            dispatch("agent.hook", .object(params), RPCContext(connectionID: handle.key, deviceIsNamed: false), to: handle)
        } catch let e as HookHTTPFailure {
            log.debug("http hook \(handle.key) from \(peer): \(e.status) \(e.message)")
            handle.send(e.status, HookRequestHandle.errorBody(e.message))
        } catch {
            handle.send(500, HookRequestHandle.errorBody(String(describing: error)))
        }
        return handle
    }

    /// The `agent.hook` params and how long the request may wait, or why not.
    private func hookParams(body: [UInt8], authorization: String?, timeout: String?) throws -> ([String: JSON], Double) {
        if stopping { throw HookHTTPFailure(503, "the server is shutting down") }
        guard let token = env.hookToken, token.authorizes(authorization) else {
            throw HookHTTPFailure(401, "missing or wrong hook token: send 'Authorization: Bearer <the state directory's hook-token>'")
        }
        guard body.count <= env.options.maxMessageBytes else {
            throw HookHTTPFailure(413, "the hook input is larger than \(env.options.maxMessageBytes) bytes")
        }
        var wait = ClaudeHookExchange.defaultWaitSeconds
        if let t = timeout {
            // decimal seconds only (Double() would also take "0x10" or "inf")
            let decimal = !t.isEmpty && t.utf8.allSatisfy { (0x30...0x39).contains($0) || $0 == 0x2E }
            guard decimal, let s = Double(t), s.isFinite, s > 0, s <= 86_400 else {
                throw HookHTTPFailure(400, "the timeout (X-CodingBridge-Timeout or ?timeout=) must be seconds within (0, 86400], not '\(t)'")
            }
            wait = s
        }
        guard case .object(var input)? = JSON.parse(String(decoding: body, as: UTF8.self)) else {
            throw HookHTTPFailure(400, "the body must be the hook input: a JSON object")
        }
        _ = ClaudeHookExchange.prepare(&input, waitSeconds: wait)
        return (input, wait)
    }
}

/// An http hook request refused before it reached `agent.hook`.
struct HookHTTPFailure: Error {
    let status: Int
    let message: String
    init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
}
