import BridgeCore

/// The device gate of network connections. Local clients (stdio, unix
/// socket, in-process) are trusted as the user and never pass here. A
/// network client must pair (`device.pair`, with a code a local client
/// asked for) and then authenticate (`initialize` with `auth.token`, or the
/// upgrade's bearer token); until then only `ping` and `rpc.discover`
/// (answered in C), `device.pair` and `initialize` are served.
extension RPCServer {
    /// Failed attempts after which a network connection is closed.
    static let maxFailedAttempts = 3

    /// Why `call` may not run on network connection `c` now, or nil.
    func deviceGate(_ call: RPCCall, _ c: Connection) -> RPCError? {
        if let d = c.pairedDevice {
            return env.devices?.isActive(d) == false ? .unauthorized("device revoked", method: call.method) : nil
        }
        switch call.method {
        case "initialize", "device.pair": return nil
        default:
            return .unauthorized("this connection has not authenticated: pair with device.pair, "
                                 + "then send initialize with auth.token", method: call.method)
        }
    }

    func refuse(_ call: RPCCall, _ c: Connection, _ e: RPCError) {
        answer(call, .failure(e))
        countFailure(c, e)
    }

    /// One more failed attempt on a network connection: logged with the
    /// peer's address; the third closes the connection once its reply left.
    func countFailure(_ c: Connection, _ e: RPCError) {
        guard let remote = c.remote else { return }
        c.failedAttempts += 1
        let reason = e.data?["reason"]?.stringValue ?? e.message
        log.warn("unauthorized from \(remote.address) (connection \(c.id), failure \(c.failedAttempts)): \(reason)")
        guard c.failedAttempts >= Self.maxFailedAttempts else { return }
        log.warn("closing connection \(c.id) from \(remote.address) after \(c.failedAttempts) failed attempts")
        env.barrier.release { _ in c.io.close() }
    }

    /// `initialize` on an unauthenticated network connection: the token of
    /// `auth.token`, else of the upgrade's bearer header, must belong to an
    /// active paired device, which becomes the connection's device. Rate
    /// limited per source host before the token is even looked at.
    func authenticate(_ p: Params, _ c: Connection) throws {
        guard let remote = c.remote, let devices = env.devices else { return }
        let host = FailureLimiter.host(of: remote.address), now = env.scheduler.nowMs
        if env.failures.isLimited(host, nowMs: now) { throw RPCError.unauthorized("rate limited") }
        let auth = try p.optional("auth", as: [String: JSON].self)
        guard let token = auth?["token"]?.stringValue ?? remote.bearerToken else {
            env.failures.record(host, nowMs: now)
            throw RPCError.unauthorized("missing token: send auth.token (or an Authorization: Bearer header)")
        }
        let device: DeviceRecord
        switch devices.authenticate(token: token) {
        case .success(let d): device = d
        case .failure(let e):
            env.failures.record(host, nowMs: now)
            throw e
        }
        if let named = try p.optional("deviceId", as: String.self), named != device.id {
            throw RPCError.otherDevice(named, device.id)
        }
        try devices.touch(device.id)
        c.authenticate(as: device.id)
        c.io.limitMessages(toBytes: env.options.maxMessageBytes)
    }
}
