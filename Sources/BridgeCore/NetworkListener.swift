import CBridge
#if canImport(Glibc)
import Glibc
#endif

/// What a network listener binds and serves.
public struct NetworkListenConfig: Sendable {
    public var host: String
    public var port: Int
    /// PEM files; nil: plain text (loopback only, the caller's rule).
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// Browser origins allowed besides the listener's own.
    public var allowedOrigins: [String] = []
    /// Serve `POST /hooks/claude`.
    public var serveHooks = false
    public init(host: String, port: Int, tlsCertificate: String? = nil, tlsKey: String? = nil) {
        self.host = host
        self.port = port
        self.tlsCertificate = tlsCertificate
        self.tlsKey = tlsKey
    }
}

/// Why a network listener could not start.
public struct NetworkListenError: Error, CustomStringConvertible {
    public let description: String
}

/// One Claude Code http hook request, answered once with `respond`, now or
/// later. `onGone` runs if the client leaves first; `respond` is then a no-op.
public final class HookHTTPRequest {
    fileprivate var raw: OpaquePointer?
    public let body: [UInt8]
    /// The whole Authorization header value.
    public let authorization: String?
    /// X-CodingBridge-Timeout, else the URL's ?timeout=.
    public let timeout: String?
    public let peer: String
    public var onGone: (() -> Void)?

    fileprivate init(raw: OpaquePointer, body: [UInt8], authorization: String?, timeout: String?, peer: String) {
        self.raw = raw
        self.body = body
        self.authorization = authorization
        self.timeout = timeout
        self.peer = peer
    }

    public var isOpen: Bool { raw != nil }

    public func respond(status: Int, json: String) {
        guard let raw else { return }
        self.raw = nil
        cb_hook_req_set_data(raw, nil)
        Unmanaged.passUnretained(self).release() // C's reference
        var text = json
        text.withUTF8 { cb_hook_req_respond(raw, Int32(status), UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count) }
    }

    fileprivate func gone() {
        guard raw != nil else { return }
        raw = nil
        let callback = onGone
        onGone = nil
        callback?()
        Unmanaged.passUnretained(self).release()
    }
}

/// A TCP listener of an `RPCEndpoint` speaking HTTP (H2O): WebSocket clients
/// on /rpc become `RPCConnection`s of the endpoint; hook POSTs go to `onHook`.
public final class NetworkListener {
    private var raw: OpaquePointer?
    public let endpoint: RPCEndpoint
    public let config: NetworkListenConfig
    /// The bound port (the chosen one when 0 was asked for).
    public private(set) var port: Int = 0
    fileprivate let onAccept: (RPCConnection, _ peer: String, _ bearer: String?) -> Void
    public var onHook: ((HookHTTPRequest) -> Void)?

    fileprivate init(endpoint: RPCEndpoint, config: NetworkListenConfig,
                     onAccept: @escaping (RPCConnection, String, String?) -> Void) {
        self.endpoint = endpoint
        self.config = config
        self.onAccept = onAccept
    }

    deinit { close() }

    public var isOpen: Bool { raw != nil }
    public var accepted: UInt64 { raw.map { cb_net_accepted($0) } ?? 0 }
    public var refused: UInt64 { raw.map { cb_net_refused($0) } ?? 0 }

    fileprivate func open() throws {
        var callbacks = cb_net_callbacks_t(on_accept: netAccept, on_hook: netHook, on_hook_gone: netHookGone)
        let origins = config.allowedOrigins.map { strdup($0) }
        defer { origins.forEach { free($0) } }
        var constOrigins = origins.map { UnsafePointer<CChar>($0) }
        var n: OpaquePointer?
        let rc: Int32 = config.host.withCString { host in
            withOptionalCString(config.tlsCertificate) { cert in
                withOptionalCString(config.tlsKey) { key in
                    constOrigins.withUnsafeMutableBufferPointer { o in
                        var c = cb_net_config_t(host: host, port: Int32(config.port), tls_cert: cert, tls_key: key,
                                                origins: o.baseAddress, n_origins: o.count,
                                                serve_hooks: config.serveHooks ? 1 : 0, max_header_bytes: 0, max_body_bytes: 0)
                        return cb_net_listen(endpoint.rpc, &c, &callbacks, Unmanaged.passUnretained(self).toOpaque(), &n)
                    }
                }
            }
        }
        guard rc == 0, let n else { throw NetworkListenError(description: Self.describe(rc, config)) }
        raw = n
        port = Int(cb_net_port(n))
    }

    private static func describe(_ rc: Int32, _ config: NetworkListenConfig) -> String {
        let at = "\(config.host):\(config.port)"
        switch rc {
        case Int32(UV_EADDRINUSE.rawValue): return "cannot listen on \(at): the address is in use"
        case Int32(UV_EADDRNOTAVAIL.rawValue): return "cannot listen on \(at): no such local address"
        case Int32(UV_EACCES.rawValue): return "cannot listen on \(at): permission denied (ports below 1024 need privileges)"
        case Int32(UV_EINVAL.rawValue): return "cannot listen on \(at): '\(config.host)' is not an IP address"
        case CB_EINVAL: return String(cString: cb_net_error())
        default: return "cannot listen on \(at): \(String(cString: cb_strerror(rc)))"
        }
    }

    /// Stops accepting; connections already made stay.
    public func close() {
        guard let raw else { return }
        cb_net_set_data(raw, nil)
        cb_net_close(raw)
        self.raw = nil
    }

    fileprivate func accept(_ c: OpaquePointer, peer: String, bearer: String?) {
        onAccept(endpoint.adopt(c), peer, bearer)
    }

    fileprivate func hook(_ r: OpaquePointer, body: [UInt8], authorization: String?, timeout: String?, peer: String) {
        let req = HookHTTPRequest(raw: r, body: body, authorization: authorization, timeout: timeout, peer: peer)
        cb_hook_req_set_data(r, Unmanaged.passRetained(req).toOpaque()) // C's reference until answered or gone
        if let onHook { onHook(req) } else { req.respond(status: 503, json: #"{"error":"hooks are not served here"}"#) }
    }
}

private func listener(_ n: OpaquePointer?) -> NetworkListener? {
    guard let n, let d = cb_net_data(n) else { return nil }
    return Unmanaged<NetworkListener>.fromOpaque(d).takeUnretainedValue()
}

private let netAccept: @convention(c) (OpaquePointer?, OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void = { n, c, peer, bearer in
    guard let c else { return }
    guard let l = listener(n) else {
        cb_conn_close(c)
        cb_conn_release(c)
        return
    }
    l.accept(c, peer: peer.map { String(cString: $0) } ?? "?", bearer: bearer.map { String(cString: $0) })
}

private let netHook: @convention(c) (OpaquePointer?, OpaquePointer?, UnsafePointer<CChar>?, Int, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void = { n, r, body, len, auth, timeout, peer in
    guard let r else { return }
    let bytes = body.map { Array(UnsafeRawBufferPointer(start: $0, count: len)) } ?? []
    guard let l = listener(n) else {
        cb_hook_req_respond(r, 503, "{}", 2)
        return
    }
    l.hook(r, body: bytes, authorization: auth.map { String(cString: $0) }, timeout: timeout.map { String(cString: $0) },
           peer: peer.map { String(cString: $0) } ?? "?")
}

private let netHookGone: @convention(c) (OpaquePointer?, OpaquePointer?) -> Void = { _, r in
    guard let r, let d = cb_hook_req_data(r) else { return }
    Unmanaged<HookHTTPRequest>.fromOpaque(d).takeUnretainedValue().gone()
}

extension RPCEndpoint {
    /// Listens on TCP for WebSocket clients (/rpc) and, if configured, hook
    /// requests. `onAccept` runs for every WebSocket client before its first
    /// message is read, with the peer's address and any bearer token.
    public func listen(network config: NetworkListenConfig,
                       onAccept: @escaping (RPCConnection, _ peer: String, _ bearer: String?) -> Void) throws -> NetworkListener {
        let l = NetworkListener(endpoint: self, config: config, onAccept: onAccept)
        try l.open()
        return l
    }
}

/// Certificates for wss://.
public enum TLSFiles {
    /// Creates a self-signed certificate and key unless both exist.
    public static func ensureSelfSigned(certificate: String, key: String, host: String) throws {
        guard cb_tls_ensure_self_signed(certificate, key, host) == 0 else {
            throw NetworkListenError(description: String(cString: cb_net_error()))
        }
    }

    /// The certificate's SHA-256 fingerprint, 64 lowercase hex digits.
    public static func sha256(certificate: String) throws -> String {
        var out = [CChar](repeating: 0, count: 65)
        guard cb_tls_cert_sha256(certificate, &out) == 0 else {
            throw NetworkListenError(description: String(cString: cb_net_error()))
        }
        return String(cString: out)
    }
}
