import CBridge
import CJansson

/// Why `serve --listen` could not open its socket, said so a person can act on it.
public struct ListenError: Error, CustomStringConvertible {
    public enum Kind: Sendable { case alreadyServed, notASocket, pathTooLong, noDirectory, permissionDenied, other }
    public let kind: Kind
    public let path: String
    public let code: Int

    public var description: String {
        switch kind {
        case .alreadyServed:
            return "another server is already listening on \(path) (stop it, or give --listen another path)"
        case .notASocket:
            return "\(path) exists and is not a socket; not replacing it (remove it or choose another path)"
        case .pathTooLong:
            return "socket path \(path) is \(path.utf8.count) bytes; unix sockets allow at most \(UnixSocket.maxPathBytes)"
        case .noDirectory:
            return "cannot create \(path): its directory does not exist"
        case .permissionDenied:
            return "cannot create \(path): permission denied"
        case .other:
            return "cannot listen on \(path): \(String(cString: cb_strerror(Int32(code))))"
        }
    }

    init(path: String, code: Int32) {
        self.path = path
        self.code = Int(code)
        switch code {
        case CB_EBUSY: kind = .alreadyServed
        case Int32(UV_EEXIST.rawValue): kind = .notASocket
        case CB_ETOOBIG: kind = .pathTooLong
        case Int32(UV_ENOENT.rawValue), Int32(UV_ENOTDIR.rawValue): kind = .noDirectory
        case Int32(UV_EACCES.rawValue), Int32(UV_EPERM.rawValue), Int32(UV_EROFS.rawValue): kind = .permissionDenied
        default: kind = .other
        }
    }
}

/// A unix-socket listener of an `RPCEndpoint`: each client that connects
/// becomes an `RPCConnection` of that endpoint, with its own framing
/// detection and output queue. Closing it (or letting it go) removes the
/// socket file; clients already connected stay.
public final class RPCListener {
    private var raw: OpaquePointer?
    public let path: String
    /// Holds the endpoint: accepted connections are adopted into it.
    public let endpoint: RPCEndpoint
    fileprivate let onAccept: (RPCConnection) -> Void
    private var acceptedCount: UInt64 = 0
    private var acceptErrorCount: UInt64 = 0

    fileprivate init(endpoint: RPCEndpoint, path: String, onAccept: @escaping (RPCConnection) -> Void) {
        self.endpoint = endpoint
        self.path = path
        self.onAccept = onAccept
    }

    fileprivate func open(backlog: Int32) throws {
        var l: OpaquePointer?
        let rc = cb_listen_unix(endpoint.rpc, path, backlog, listenerAccept, Unmanaged.passUnretained(self).toOpaque(), &l)
        guard rc == 0, let l else { throw ListenError(path: path, code: rc) }
        raw = l
    }

    deinit { close() }

    /// Clients accepted so far.
    public var accepted: UInt64 { raw.map { cb_listener_accepted($0) } ?? acceptedCount }
    /// accept() failures (e.g. out of file descriptors).
    public var acceptErrors: UInt64 { raw.map { cb_listener_accept_errors($0) } ?? acceptErrorCount }
    public var isOpen: Bool { raw != nil }

    /// Stops accepting and removes the socket file (if it is still ours).
    public func close() {
        guard let raw else { return }
        acceptedCount = cb_listener_accepted(raw)
        acceptErrorCount = cb_listener_accept_errors(raw)
        cb_listener_set_data(raw, nil)
        cb_listener_close(raw) // freed by C once libuv has closed the handle
        self.raw = nil
    }

    fileprivate func accept(_ c: OpaquePointer) {
        onAccept(endpoint.adopt(c))
    }
}

private let listenerAccept: cb_listen_cb = { l, c in
    guard let c else { return }
    guard let l, let d = cb_listener_data(l) else {
        // not ours any more: close it, nobody will read it (C frees it once closed)
        cb_conn_close(c)
        cb_conn_release(c)
        return
    }
    Unmanaged<RPCListener>.fromOpaque(d).takeUnretainedValue().accept(c)
}

extension RPCEndpoint {
    /// Listens on a unix socket at `path` (created 0600; a dead server's
    /// socket is replaced, a live one refused: see `ListenError`).
    /// `onAccept` runs for every client before its first byte is read.
    public func listen(unixPath path: String, backlog: Int32 = 4096,
                       onAccept: @escaping (RPCConnection) -> Void = { _ in }) throws -> RPCListener {
        let l = RPCListener(endpoint: self, path: path, onAccept: onAccept)
        try l.open(backlog: backlog)
        return l
    }
}

extension RPCConnection {
    /// Drops the client now: unsent output is discarded and the socket
    /// closed (a graceful `close` would wait for a reader that never reads).
    /// The largest message accepted from this client from now on.
    public func limitMessages(toBytes n: Int) {
        guard let raw, n > 0 else { return }
        cb_conn_set_max_message_bytes(raw, n)
    }

    public func abort() {
        guard let raw, cb_conn_is_closed(raw) == 0 else { return }
        cb_conn_abort(raw)
    }
}
