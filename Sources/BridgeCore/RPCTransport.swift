import CBridge
import CJansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a peer frames its messages; detected from the first bytes it sends.
public enum Framing: String, Sendable {
    case unknown, ndjson, lsp, webSocket
}

/// Limits of the JSON-RPC transport. Defaults: 16 MiB messages, nesting 128,
/// input paused above 4 MiB of unread output and resumed below 1 MiB,
/// notifications dropped above 256 KiB (the one drop policy, for every
/// transport; `RPCEndpoint.notifyLimitBytes` changes it later).
public struct TransportLimits: Sendable {
    public var maxMessageBytes: Int = 16 << 20
    public var maxDepth: Int = 128
    public var highWater: Int = 4 << 20
    public var lowWater: Int = 1 << 20
    public var notifyLimit: Int = 256 << 10
    public init() {}
}

/// What carries a connection's bytes.
public enum TransportKind: Sendable {
    case stdio, socket, memory, webSocket
}

/// One JSON-RPC peer (stdio, a unix-socket client, or in-memory). Owned by
/// its `RPCEndpoint`.
public final class RPCConnection {
    var raw: OpaquePointer?
    public let id: Int
    public let transport: TransportKind
    fileprivate var onClosed: (() -> Void)?

    fileprivate init(_ raw: OpaquePointer) {
        self.raw = raw
        id = Int(cb_conn_id(raw))
        switch cb_conn_transport(raw) {
        case CB_TRANSPORT_STDIO: transport = .stdio
        case CB_TRANSPORT_SOCKET: transport = .socket
        case CB_TRANSPORT_WEBSOCKET: transport = .webSocket
        default: transport = .memory
        }
    }

    deinit {
        // The C connection outlives its close until this object goes (an
        // in-memory peer can still read what was written before EOF), and
        // this object may go first: C frees the connection once its
        // transport has closed too.
        if let raw {
            cb_conn_set_data(raw, nil)
            cb_conn_release(raw)
        }
    }

    public var framing: Framing {
        guard let raw else { return .unknown }
        switch cb_conn_framing(raw) {
        case CB_FRAMING_NDJSON: return .ndjson
        case CB_FRAMING_LSP: return .lsp
        case CB_FRAMING_WEBSOCKET: return .webSocket
        default: return .unknown
        }
    }
    public var isClosed: Bool { raw.map { cb_conn_is_closed($0) != 0 } ?? true }
    /// Still accepting input (not closing or closed).
    public var isOpen: Bool { raw.map { cb_conn_is_closing($0) == 0 } ?? false }
    /// Bytes queued for the peer and not yet written.
    public var queuedBytes: Int { raw.map { Int(cb_conn_queued($0)) } ?? 0 }
    /// How often input was paused because the peer did not read its replies.
    public var pauses: UInt64 { raw.map { cb_conn_stats($0).pauses } ?? 0 }
    /// Notifications dropped by the slow-reader policy (`notifyLimit`).
    public var droppedNotifications: UInt64 { raw.map { cb_conn_stats($0).dropped_notifications } ?? 0 }
    /// Bytes the peer has taken so far (progress of a slow reader).
    public var bytesWritten: UInt64 { raw.map { cb_conn_stats($0).bytes_out } ?? 0 }

    /// Sends a server->client notification. Returns false when it was dropped
    /// (closed connection, or the peer has not read enough of its output).
    @discardableResult
    public func notify(_ method: String, _ params: JSON?) -> Bool {
        guard let raw else { return false }
        let p = params?.makeJanssonValue()
        defer { if let p { json_decref(p) } }
        return cb_conn_notify(raw, method, p) == 0
    }

    /// Sends a notification already serialised as one JSON message (a
    /// notification serialised once for many clients), framed for this
    /// peer, under the same policy as `notify`: false when it was dropped
    /// (counted in `droppedNotifications`) or the connection is closing.
    @discardableResult
    public func sendNotification(serialized bytes: [UInt8]) -> Bool {
        guard let raw else { return false }
        return bytes.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { cb_conn_send_notification(raw, $0.baseAddress, $0.count) == 0 }
        }
    }

    /// Flushes queued output, then closes; `then` runs when it is done.
    public func close(then: (() -> Void)? = nil) {
        guard let raw, cb_conn_is_closing(raw) == 0 else { then?(); return }
        onClosed = then
        cb_conn_close(raw)
    }

    // MARK: in-memory peers

    /// Feeds raw bytes as if the peer had written them (in-memory connections).
    public func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let raw, let base = bytes.baseAddress else { return }
        _ = cb_conn_feed(raw, base.assumingMemoryBound(to: CChar.self), bytes.count)
    }
    public func feed(_ text: String) {
        var t = text
        t.withUTF8 { feed(UnsafeRawBufferPointer($0)) }
    }
    public func feed(_ bytes: [UInt8]) { bytes.withUnsafeBytes { feed($0) } }
    /// The peer closed its side.
    public func feedEOF() { if let raw { cb_conn_feed_eof(raw) } }
    /// Everything written to an in-memory peer since the last call.
    public func takeOutput() -> [UInt8] {
        guard let raw else { return [] }
        var n = 0
        guard let p = cb_conn_output(raw, &n), n > 0 else { return [] }
        let out = Array(UnsafeRawBufferPointer(start: p, count: n).bindMemory(to: UInt8.self))
        cb_conn_output_clear(raw)
        return out
    }
    /// Discards collected output (benchmarks that only count).
    public func discardOutput() -> Int {
        guard let raw else { return 0 }
        var n = 0
        _ = cb_conn_output(raw, &n)
        cb_conn_output_clear(raw)
        return n
    }
}

/// Answers one request. Exactly one of `result`/`error` takes effect; if the
/// responder is dropped unanswered the client still gets a -32603, so a
/// forgotten async reply can never leave a client waiting forever.
public final class RPCResponder {
    private var req: OpaquePointer?
    fileprivate init(_ req: OpaquePointer) { self.req = req }
    public var isAnswered: Bool { req == nil }

    public func result(_ value: JSON) {
        guard let r = req else { return }
        req = nil
        // encoded in Swift: no intermediate jansson tree on the hot path
        let bytes = value.encoded
        bytes.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { cb_req_result_raw(r, $0.baseAddress, $0.count) }
        }
    }
    public func error(code: Int, message: String, data: JSON?) {
        guard let r = req else { return }
        req = nil
        cb_req_error(r, Int32(truncatingIfNeeded: code), message, data?.makeJanssonValue())
    }
    deinit {
        if let r = req {
            cb_req_error(r, -32603, "Internal error", JSON.object(["reason": "the request was dropped without a reply"]).makeJanssonValue())
        }
    }
}

/// One incoming call. `responder` is nil for a notification.
public struct RPCCall {
    public let method: String
    public let params: JSON?
    public let connection: RPCConnection
    public let responder: RPCResponder?
}

/// The JSON-RPC endpoint over the C transport: decodes, validates envelopes,
/// answers fixed-result methods in C, and hands every other call to `onCall`.
public final class RPCEndpoint {
    public let loop: EventLoop
    var rpc: OpaquePointer!
    fileprivate var connections: [Int: RPCConnection] = [:]
    private var closeWaiters: [() -> Void] = []
    private var signals: OpaquePointer?
    /// Every call that C does not answer itself.
    public var onCall: (RPCCall) -> Void = { $0.responder?.error(code: -32601, message: "Method not found", data: nil) }
    /// The peer closed its input (EOF) or stopped accepting output.
    public var onPeerGone: (RPCConnection) -> Void = { _ in }
    /// SIGTERM / SIGINT arrived (after `watchSignals`).
    public var onSignal: (Int32) -> Void = { _ in }
    /// A connection finished closing (whatever closed it: EOF, a write
    /// error, `abort`, `close`); once per connection, after it left `allConnections`.
    public var onClosed: (RPCConnection) -> Void = { _ in }

    public init(loop: EventLoop, limits: TransportLimits = TransportLimits()) {
        self.loop = loop
        var l = cb_rpc_limits_t()
        l.max_message_bytes = max(1, limits.maxMessageBytes)
        l.max_depth = max(1, limits.maxDepth)
        l.high_water = max(1, limits.highWater)
        l.low_water = max(1, limits.lowWater)
        l.notify_limit = max(1, limits.notifyLimit)
        rpc = cb_rpc_new(loop.uv, &l, endpointCall, endpointConnEvent, nil)
        precondition(rpc != nil, "cb_rpc_new: out of memory")
        cb_rpc_set_data(rpc, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        if let signals { cb_signals_close(signals) }
        for c in connections.values { if let raw = c.raw { cb_conn_set_data(raw, nil) } }
        // No callback reaches this object from here on. C closes what is
        // still open and frees each connection (and the endpoint, last) once
        // its handles are closed and its owner has let go.
        cb_rpc_close(rpc)
    }

    /// Closes every connection (each flushes what is queued first); `then`
    /// runs once all of them have finished closing (at once if none is open).
    public func close(then: @escaping () -> Void) {
        closeWaiters.append(then)
        for c in connections.values { if let raw = c.raw, cb_conn_is_closing(raw) == 0 { cb_conn_close(raw) } }
        finishClose()
    }

    private func finishClose() {
        guard !closeWaiters.isEmpty, connections.isEmpty else { return }
        let waiters = closeWaiters
        closeWaiters = []
        for w in waiters { w() }
    }

    /// Queued output above which notifications are dropped, for every
    /// connection (open now or later): the slow-reader policy.
    public var notifyLimitBytes: Int {
        get { Int(cb_rpc_notify_limit(rpc)) }
        set { cb_rpc_set_notify_limit(rpc, max(1, newValue)) }
    }

    /// Answers `method` in C with a fixed result (valid JSON text).
    public func setStaticResult(_ method: String, json: String) {
        var t = json
        let rc = t.withUTF8 { b in b.withMemoryRebound(to: CChar.self) { cb_rpc_set_static(rpc, method, $0.baseAddress, $0.count) } }
        precondition(rc == 0, "static result for \(method) is not JSON")
    }

    /// Starts serving the process's stdin/stdout.
    public func openStdio() throws -> RPCConnection {
        var raw: OpaquePointer?
        let rc = cb_rpc_open_stdio(rpc, &raw)
        guard rc == 0, let raw else { throw TransportError(code: Int(rc)) }
        return adopt(raw)
    }

    /// A connection driven from this process (tests, fuzzers, benchmarks).
    public func openInMemory() -> RPCConnection {
        guard let raw = cb_rpc_open_memory(rpc) else { fatalError("cb_rpc_open_memory: out of memory") }
        return adopt(raw)
    }

    public var allConnections: [RPCConnection] { connections.keys.sorted().compactMap { connections[$0] } }

    /// Delivers SIGTERM/SIGINT to `onSignal` instead of killing the process.
    public func watchSignals() {
        guard signals == nil else { return }
        var s: OpaquePointer?
        cb_signals_watch(loop.uv, endpointSignal, Unmanaged.passUnretained(self).toOpaque(), &s)
        signals = s
    }

    /// Runs `body` once after `ms` milliseconds (the timer does not keep the
    /// loop alive). Returns a cancel function.
    @discardableResult
    public func after(ms: UInt64, _ body: @escaping () -> Void) -> () -> Void {
        let box = Unmanaged.passRetained(DeadlineBox(body))
        var d: OpaquePointer?
        cb_deadline_start(loop.uv, ms, { data in
            guard let data else { return }
            Unmanaged<DeadlineBox>.fromOpaque(data).takeUnretainedValue().fire()
        }, box.toOpaque(), &d)
        var done = false
        return {
            guard !done else { return }
            done = true
            cb_deadline_cancel(d)
            box.release()
        }
    }

    public struct Counters: Sendable {
        public var messages, answeredInC, dispatched, errors: UInt64
    }
    public var counters: Counters {
        let c = cb_rpc_counters(rpc)
        return Counters(messages: c.messages, answeredInC: c.c_answered, dispatched: c.dispatched, errors: c.errors)
    }

    func adopt(_ raw: OpaquePointer) -> RPCConnection {
        let c = RPCConnection(raw)
        cb_conn_set_data(raw, Unmanaged.passUnretained(c).toOpaque())
        connections[c.id] = c
        return c
    }

    fileprivate func closed(_ c: RPCConnection) {
        connections[c.id] = nil
        onClosed(c)
        let then = c.onClosed
        c.onClosed = nil
        then?()
        finishClose()
    }
}

private final class DeadlineBox {
    var body: (() -> Void)?
    init(_ body: @escaping () -> Void) { self.body = body }
    func fire() { let b = body; body = nil; b?() }
}

public struct TransportError: Error, CustomStringConvertible {
    public let code: Int
    public var description: String { String(cString: cb_strerror(Int32(code))) }
}

private func endpoint(_ rpc: OpaquePointer?) -> RPCEndpoint? {
    guard let rpc, let d = cb_rpc_data(rpc) else { return nil }
    return Unmanaged<RPCEndpoint>.fromOpaque(d).takeUnretainedValue()
}

private func connection(_ c: OpaquePointer?) -> RPCConnection? {
    guard let c, let d = cb_conn_data(c) else { return nil }
    return Unmanaged<RPCConnection>.fromOpaque(d).takeUnretainedValue()
}

private let endpointCall: cb_rpc_call_cb = { rpc, conn, req, method, methodLen, params in
    guard let ep = endpoint(rpc), let c = connection(conn) else {
        if let req { cb_req_error(req, -32603, "Internal error", nil) }
        return
    }
    let name = String(decoding: UnsafeRawBufferPointer(start: method, count: methodLen), as: UTF8.self)
    let p: JSON? = params.map { JSON(borrowing: $0) }
    ep.onCall(RPCCall(method: name, params: p, connection: c, responder: req.map { RPCResponder($0) }))
}

private let endpointConnEvent: cb_rpc_conn_cb = { rpc, conn, ev in
    guard let ep = endpoint(rpc), let c = connection(conn) else { return }
    switch ev {
    case CB_CONN_EV_CLOSED: ep.closed(c)
    default: ep.onPeerGone(c)
    }
}

private let endpointSignal: cb_signal_cb = { data, signum in
    guard let data else { return }
    Unmanaged<RPCEndpoint>.fromOpaque(data).takeUnretainedValue().onSignal(signum)
}
