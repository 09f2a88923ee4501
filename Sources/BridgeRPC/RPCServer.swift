import BridgeCore
import BridgeEngine

/// The JSON-RPC server: one `Connection` per client whatever the transport,
/// one lifecycle state machine, dispatch into the MethodTable, and every
/// reply released behind the store's commit (`ReplyBarrier`). Transport,
/// framing and envelope rules live in C (CBridge); `ping` and `rpc.discover`
/// are answered there without entering Swift.
///
/// EOF on stdin (without listeners), `exit` on stdio, SIGTERM or SIGINT stop
/// the process: pending replies are released, queued output is flushed, and
/// the exit code is 0 (`exit` before `shutdown`: 1).
public final class RPCServer {
    public static let protocolVersion = "1.0"
    public static let serverName = "codingbridge"
    /// Methods the server itself implements (never in the MethodTable).
    public static let builtins = ["initialize", "initialized", "shutdown", "exit", "ping", "rpc.discover"]

    public let env: ServerEnvironment
    public let methods: MethodTable
    public let endpoint: RPCEndpoint
    /// The lifecycle stdio and in-process clients share.
    let processLifecycle = Lifecycle(endsProcess: true)
    public var phase: Lifecycle.Phase { processLifecycle.phase }
    /// Set when the server decided to stop; what `serve` returns.
    public private(set) var exitCode: Int32?
    var stopping: Bool { processLifecycle.phase == .stopped }
    private var finished = false
    var stdio: Connection?
    public internal(set) var listeners: [RPCListener] = []
    public internal(set) var networkListeners: [NetworkListener] = []
    var hasListeners: Bool { !listeners.isEmpty || !networkListeners.isEmpty }
    private var slowClientTimer: LoopTimer?
    /// How long a network client may stay connected without authenticating.
    public var authDeadlineMs: UInt64 = 30_000
    /// How long `stop` waits for peers to take their queued output.
    public var flushTimeoutMs: UInt64 = 5000
    public var router: NotificationRouter { env.router }
    /// The output policy for every client (`SlowClientPolicy`); the C
    /// transport applies its notify limit.
    public var policy: SlowClientPolicy {
        get { env.router.policy }
        set {
            env.router.policy = newValue
            endpoint.notifyLimitBytes = newValue.notifyLimitBytes
        }
    }
    var log: Logger { env.log }

    /// A server with the standard methods (`methods` nil: startup runs first,
    /// `ServerEnvironment.start`), or with only the given table (tests).
    public init(env: ServerEnvironment, methods: MethodTable? = nil) throws {
        self.env = env
        if let methods {
            self.methods = methods
        } else {
            try env.start()
            self.methods = MethodTable.standard(env)
        }
        for name in Self.builtins where self.methods.handlers[name] != nil {
            throw RPCError.internalError("method \(name) is built into the server")
        }
        var limits = TransportLimits()
        limits.maxMessageBytes = env.options.maxMessageBytes
        limits.notifyLimit = env.router.policy.notifyLimitBytes
        endpoint = RPCEndpoint(loop: env.loop, limits: limits)
        // The answers that never change are spliced into replies in C.
        endpoint.setStaticResult("ping", json: "{}")
        endpoint.setStaticResult("rpc.discover", json: OpenRPCDocument.text)
        endpoint.onCall = { [unowned self] call in self.handle(call) }
        endpoint.onPeerGone = { [unowned self] io in self.peerGone(io) }
        // weak: the endpoint may close what is left after the server is gone.
        endpoint.onClosed = { [weak self] io in self?.closed(io) }
        endpoint.onSignal = { [unowned self] sig in self.signalled(sig) }
    }

    // MARK: connections

    func adopt(_ io: RPCConnection, remote: RemotePeer? = nil) -> Connection {
        let ownLifecycle = io.transport == .socket || io.transport == .webSocket || remote != nil
        let c = Connection(io, lifecycle: ownLifecycle ? Lifecycle(endsProcess: false) : processLifecycle, remote: remote)
        env.router.add(c)
        return c
    }

    /// Serves on a unix socket at `path` (0600; a dead server's socket is
    /// replaced, a live one refused with a `ListenError`). Each client has its
    /// own lifecycle: `initialize` (deviceId from its params, else a generated
    /// one), `shutdown` and `exit` concern that client only.
    @discardableResult
    public func listen(unixPath path: String) throws -> RPCListener {
        let l = try endpoint.listen(unixPath: path) { [unowned self] io in
            let c = self.adopt(io)
            self.log.debug("socket client \(c.id) connected")
        }
        listeners.append(l)
        watchSlowClients()
        log.info("listening on \(path)")
        return l
    }

    /// Serves WebSocket clients on /rpc (and Claude Code http hooks on
    /// /hooks/claude when `config.serveHooks`). Each client is a network
    /// peer: its own lifecycle, and it must authenticate as a paired device.
    @discardableResult
    public func listen(network config: NetworkListenConfig) throws -> NetworkListener {
        let l = try endpoint.listen(network: config) { [unowned self] io, peer, bearer in
            self.admitNetworkClient(self.adopt(io, remote: RemotePeer(address: peer, bearerToken: bearer)))
        }
        l.onHook = { [unowned self] req in
            let h = self.handleHookRequest(body: req.body, authorization: req.authorization, timeout: req.timeout,
                                           peer: req.peer) { req.respond(status: $0, json: $1) }
            req.onGone = { h.cancel() }
        }
        networkListeners.append(l)
        watchSlowClients()
        return l
    }

    /// Until it authenticates a network client is held to small messages
    /// (pairing and `initialize` are small) and to a deadline, and only so
    /// many may wait at once per source host and in all: connections cost
    /// memory and descriptors before anyone knows who is calling.
    private func admitNetworkClient(_ c: Connection) {
        guard let peer = c.remote?.address else { return }
        let host = FailureLimiter.host(of: peer)
        let waiting = env.router.all.filter { $0.needsAuth && $0.id != c.id }
        let fromHost = waiting.filter { FailureLimiter.host(of: $0.remote?.address ?? "") == host }.count
        if waiting.count >= Self.unauthenticatedLimit || fromHost >= Self.unauthenticatedPerHostLimit {
            log.warn("network client from \(peer) refused: \(fromHost) unauthenticated connections from \(host), \(waiting.count) in all")
            return c.io.abort()
        }
        log.debug("network client \(c.id) connected from \(peer)")
        c.io.limitMessages(toBytes: min(Self.unauthenticatedMessageBytes, env.options.maxMessageBytes))
        _ = endpoint.after(ms: authDeadlineMs) { [weak self, weak c] in
            guard let self, let c, c.needsAuth, c.io.isOpen else { return }
            self.log.info("network client \(c.id) from \(peer) did not authenticate within \(self.authDeadlineMs / 1000) s: dropped")
            c.io.abort()
        }
    }

    static let unauthenticatedMessageBytes = 64 << 10
    static let unauthenticatedLimit = 1024
    static let unauthenticatedPerHostLimit = 256

    /// Serves until `exit` on stdio, a signal, or (without listeners) the end
    /// of stdin; returns the exit code. With listeners, the end of stdin (or
    /// `stdio: false`) leaves the server running for its socket clients.
    public func serve(stdio useStdio: Bool) throws -> Int32 {
        endpoint.watchSignals()
        if useStdio {
            stdio = adopt(try endpoint.openStdio())
            watchSlowClients()
            log.debug("serving on stdio")
        }
        if !useStdio && !hasListeners { throw RPCError.internalError("nothing to serve: no stdio and no listener") }
        env.loop.run()
        return exitCode ?? 0
    }

    /// An in-process client: bytes in, replies out, no pipes (fuzzers,
    /// benchmarks, unit tests). Its calls take the same path as stdio's.
    /// `remote`: the client stands for a network peer (its own lifecycle,
    /// and it must authenticate), for tests of what the network sees.
    public func makeInProcessClient(remote: RemotePeer? = nil) -> InProcessClient {
        InProcessClient(server: self, connection: adopt(endpoint.openInMemory(), remote: remote).io)
    }

    private func watchSlowClients() {
        guard slowClientTimer == nil else { return }
        slowClientTimer = LoopTimer(loop: env.loop, everyMs: router.policy.checkIntervalMs) { [unowned self] in
            self.checkSlowClients()
        }
    }

    /// Applies the slow-client policy (see `SlowClientPolicy`).
    public func checkSlowClients() { router.checkSlowClients(nowMs: env.loop.nowMs) }

    /// A peer closed its input or stopped taking output: finish what it can
    /// still take, then close. The end of stdin without listeners ends the process.
    private func peerGone(_ io: RPCConnection) {
        log.debug("connection \(io.id): peer gone")
        if io === stdio?.io {
            if !hasListeners { return stop(exitCode: 0, reason: "end of input") }
            log.info("end of stdin; still serving on the socket")
        }
        env.barrier.release { _ in io.close() }
    }

    private func closed(_ io: RPCConnection) {
        let device = env.router.connection(io.id)?.deviceID
        env.router.remove(io.id)
        guard !stopping else { return }
        if let device { env.push?.deviceLeft(device, host: env.engine) }
        env.waiters.connectionClosed(io.id, host: env.engine)
        // stdio cut off by the slow-client policy: as at the end of input.
        if io === stdio?.io && !hasListeners { stop(exitCode: 0, reason: "stdio closed") }
    }

    private func signalled(_ sig: Int32) {
        guard !stopping else {
            // a second signal: the user does not want to wait for the flush
            log.warn("second signal while stopping: exiting without flushing")
            return finishStop()
        }
        stop(exitCode: 0, reason: sig == 15 ? "SIGTERM" : "SIGINT")
    }

    /// Stops accepting and removes the socket files.
    public func closeListeners() {
        for l in listeners { l.close() }
        for l in networkListeners { l.close() }
        listeners = []
        networkListeners = []
    }

    /// Stops serving: releases the replies waiting for the commit, flushes
    /// every connection (for at most `flushTimeoutMs`: a peer that never
    /// reads cannot hold the process), writes the last snapshot, stops the loop.
    public func stop(exitCode code: Int32, reason: String) {
        guard !stopping else { return }
        exitCode = code
        processLifecycle.phase = .stopped
        log.debug("stopping (\(reason)), exit code \(code)")
        closeListeners()
        slowClientTimer = nil
        env.barrier.release { [weak self] _ in self?.closeAll() }
    }

    private func closeAll() {
        let cancel = endpoint.after(ms: flushTimeoutMs) { [weak self] in
            self?.log.warn("output not taken by the client within \(self?.flushTimeoutMs ?? 0) ms; exiting anyway")
            self?.finishStop()
        }
        endpoint.close(then: { [weak self] in
            cancel()
            self?.finishStop()
        })
    }

    private func finishStop() {
        guard !finished else { return }
        finished = true
        env.finish()
        env.loop.stop()
    }
}
