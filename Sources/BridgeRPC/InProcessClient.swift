import BridgeCore

/// Drives the server from inside the process: feed raw bytes (any framing),
/// read back what the server wrote. A reply waits for the store's commit of
/// what was written before it: with a write pending it appears in
/// `takeOutput()` after the loop's turn end (or `env.store?.flush()`).
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
