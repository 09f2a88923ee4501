import CBridge
import CUV
#if canImport(Glibc)
import Glibc
#endif

/// The answer to one `HTTP2Client.post`.
public struct HTTP2Response: Sendable {
    /// The HTTP status; 0 when there was no complete response (`error` says why).
    public let status: Int
    /// curl's reason for a status 0 ("closed" after `HTTP2Client.close`); nil otherwise.
    public let error: String?
    public let body: [UInt8]
    /// The response's headers in order received, names lowercase.
    public let headers: [(name: String, value: String)]
    /// 20 (HTTP/2), 11 (HTTP/1.1), 10 (HTTP/1.0); 0 when nothing was answered.
    public let httpVersion: Int
    /// From `post` to the answer.
    public let totalMs: Double

    public init(status: Int, error: String?, body: [UInt8], headers: [(name: String, value: String)],
                httpVersion: Int, totalMs: Double) {
        self.status = status
        self.error = error
        self.body = body
        self.headers = headers
        self.httpVersion = httpVersion
        self.totalMs = totalMs
    }

    /// The first header of that name (any case): `apns-id`, `location`, `retry-after`.
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name == lower }?.value
    }
}

/// Why a request could not be posted (no completion will come).
public struct HTTP2ClientError: Error, CustomStringConvertible {
    public let code: Int32
    public var description: String { String(cString: cb_strerror(code)) }
}

/// An HTTP client for pushes (APNs, Web Push) on the loop: libcurl's multi
/// interface, HTTP/2 over one multiplexed, long-lived connection per host for
/// https:// (HTTP/1.1 for http://). Every accepted `post` gets exactly one
/// completion, on the loop thread and never from inside `post`. Loop thread
/// only. `close` cancels what is in flight (completions with status 0,
/// error "closed") and calls back once everything is freed; dropping the
/// client closes it the same way, without the callback.
public final class HTTP2Client {
    /// The loop outlives the C client, whatever order their owners go in.
    public let loop: EventLoop
    private var raw: OpaquePointer?

    /// caFile: a PEM file of CAs to trust instead of the system's (a test server's).
    public init(loop: EventLoop, caFile: String? = nil) throws {
        self.loop = loop
        var c: OpaquePointer?
        var rc = cb_http2_new(loop.uv, &c)
        guard rc == 0, let c else { throw HTTP2ClientError(code: rc) }
        raw = c
        if let caFile {
            rc = cb_http2_set_ca_file(c, caFile)
            guard rc == 0 else { throw HTTP2ClientError(code: rc) } // deinit closes c
        }
    }

    deinit {
        if let raw { cb_http2_close(raw, nil, nil) }
    }

    public var isOpen: Bool { raw != nil }

    /// POSTs `body` to `url`. `timeoutMs` bounds the whole request (queueing
    /// and connecting included; <= 0: 30 s). Throws, with no completion to
    /// come, for an empty or ':' header name, CR/LF in a header, an empty
    /// URL, or after close.
    public func post(url: String, headers: [(String, String)], body: [UInt8], timeoutMs: Int,
                     completion: @escaping (HTTP2Response) -> Void) throws {
        guard let raw else { throw HTTP2ClientError(code: CB_ECLOSED) }
        // C splits each line at its first ':' (and refuses CR/LF in it)
        guard headers.allSatisfy({ !$0.0.isEmpty && !$0.0.contains(":") }) else { throw HTTP2ClientError(code: CB_EINVAL) }
        // "name: value\0" lines in one buffer (C copies them).
        var text = [UInt8]()
        text.reserveCapacity(headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 3 })
        var starts = [Int]()
        starts.reserveCapacity(headers.count)
        for (name, value) in headers {
            starts.append(text.count)
            text.append(contentsOf: name.utf8)
            text.append(0x3A)
            text.append(0x20)
            text.append(contentsOf: value.utf8)
            text.append(0)
        }
        let box = Unmanaged.passRetained(CompletionBox(completion)).toOpaque()
        let rc: Int32 = text.withUnsafeBytes { t in
            let base = t.bindMemory(to: CChar.self).baseAddress
            var pointers = starts.map { Optional(UnsafePointer<CChar>(base! + $0)) }
            return pointers.withUnsafeMutableBufferPointer { h in
                body.withUnsafeBytes { b in
                    cb_http2_post(raw, url, h.baseAddress, Int32(h.count), b.baseAddress, b.count,
                                  Int32(clamping: timeoutMs), http2Done, box)
                }
            }
        }
        guard rc == 0 else {
            Unmanaged<CompletionBox>.fromOpaque(box).release()
            throw HTTP2ClientError(code: rc)
        }
    }

    /// Cancels requests in flight, closes the connections, and calls `done`
    /// on a later loop turn, after the cancelled completions. Once only.
    public func close(_ done: @escaping () -> Void) {
        guard let raw else { return }
        self.raw = nil
        let box = Unmanaged.passRetained(ClosedBox(done)).toOpaque()
        cb_http2_close(raw, http2Closed, box)
    }
}

private final class CompletionBox {
    let body: (HTTP2Response) -> Void
    init(_ body: @escaping (HTTP2Response) -> Void) { self.body = body }
}

private final class ClosedBox {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// The C response lives for the call only: copy it out.
private func response(_ r: UnsafePointer<cb_http2_response_t>) -> HTTP2Response {
    let c = r.pointee
    let body = c.body.map { Array(UnsafeRawBufferPointer(start: $0, count: c.body_len)) } ?? []
    var headers: [(name: String, value: String)] = []
    headers.reserveCapacity(c.n_headers)
    for i in 0..<c.n_headers {
        let h = c.headers[i]
        headers.append((String(cString: h.name), String(cString: h.value)))
    }
    return HTTP2Response(status: Int(c.status), error: c.error.map { String(cString: $0) }, body: body,
                         headers: headers, httpVersion: Int(c.http_version), totalMs: c.total_ms)
}

private let http2Done: cb_http2_done_cb = { r, data in
    guard let r, let data else { return }
    let box = Unmanaged<CompletionBox>.fromOpaque(data).takeRetainedValue()
    box.body(response(r))
}

private let http2Closed: @convention(c) (UnsafeMutableRawPointer?) -> Void = { data in
    guard let data else { return }
    Unmanaged<ClosedBox>.fromOpaque(data).takeRetainedValue().body()
}
