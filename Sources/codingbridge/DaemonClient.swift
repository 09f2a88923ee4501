import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// A short NDJSON session with the running daemon over its unix socket, as a
/// local (trusted) client: connect, initialize, calls one at a time.
struct DaemonClient {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let path: String
    private let fd: Int32
    private var reader: HookLineReader
    private var nextID: Int64 = 1
    private let deadline: Double

    /// Connects to `path` and initializes; a Failure says why not (no daemon runs).
    init(path: String, timeoutSeconds: Double = 10) throws {
        self.path = path
        deadline = HookClock.now() + timeoutSeconds
        switch HookSocket.connect(path, deadline: deadline) {
        case .success(let f): fd = f
        case .failure(let why):
            throw Failure(description: "no codingbridge daemon at \(path) (\(why)); start one with `codingbridge serve --listen unix --no-stdio`")
        }
        reader = HookLineReader(fd: fd)
        _ = try call("initialize", ["clientInfo": ["name": "codingbridge devices", "version": "1"],
                                    "capabilities": ["notifications": false]])
    }

    func close() { _ = Glibc.close(fd) }

    /// The result of `method`, or a Failure with the server's error message and reason.
    mutating func call(_ method: String, _ params: JSON = [:]) throws -> JSON {
        let id = nextID
        nextID += 1
        let msg: JSON = ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params]
        guard HookIO.writeAll(fd: fd, Array((msg.serialized() + "\n").utf8), deadline: deadline) else {
            throw Failure(description: "could not send to \(path)")
        }
        while let line = reader.next(deadline: deadline) {
            guard let reply = JSON.parse(line), reply["id"] == .int(id) else { continue }
            if let err = reply["error"] {
                let reason = err["data"]?["reason"]?.stringValue.map { ": " + $0 } ?? ""
                throw Failure(description: "\(method) failed: \(err["message"]?.stringValue ?? "error")\(reason)")
            }
            return reply["result"] ?? .null
        }
        throw Failure(description: reader.failed ? "the daemon closed the connection" : "no answer from the daemon in time")
    }
}
