import BridgeCore
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

// libFuzzer target over the whole method dispatch: every input becomes a
// sequence of JSON-RPC messages sent to a fresh, real server (in-process
// client, manual clock, in-memory store). The oracle: nothing crashes (ASan),
// every request with an id gets exactly one well-formed response, error codes
// are JSON-RPC's or application ones (-32000...-32099) with a `data` object,
// and the server still answers `ping` afterwards.
//
// Input format: the first byte picks the mode.
//   even: raw NDJSON text (after initialize): libFuzzer mutates real lines
//         (the corpus and dictionary hold method names and field names).
//   odd:  structured: each following chunk picks a method from the registry
//         and builds params from the bytes (keys from `fieldNames`, values of
//         every JSON type), so deep handler paths are reached quickly.

let fieldNames: [String] = [
    "sessionId", "type", "projectName", "projectPath", "toolName", "input", "command", "file_path", "todos",
    "content", "status", "activeForm", "requestId", "decision", "deviceId", "source", "questionId", "questions",
    "question", "header", "options", "label", "multiSelect", "answers", "phase", "lowPowerMode", "network",
    "connected", "permissions", "notifications", "liveActivities", "backgroundTimeExpired", "summary", "error",
    "handedOffTo", "timeoutSeconds", "sentAt", "prompt", "url", "ms", "seconds", "style", "text", "mode",
    "enableLiveActivities", "showNotificationDetails", "approvalTimeoutSeconds", "customRedactionRules",
    "pattern", "name", "replacement", "locale", "state", "id", "limit", "afterId", "key", "value",
]
let enumValues: [String] = [
    "task_started", "tool_use", "progress", "approval_request", "approval_cancelled", "approval_timeout", "question",
    "task_completed", "task_failed", "session_handoff", "allow", "deny", "background", "foreground", "inactive",
    "pending", "in_progress", "completed", "Bash", "Edit", "Read", "npm test", "s1", "s2", "r1", "r2", "q1",
    "denied", "authorized", "notification", "connected", "disconnected", "(", "a(b", "\\", "codingbridge://session/s1",
    "codingbridge://session/s1/approval/r1", "de", "en", "", "é🙂", "\u{0}",
]

struct Bytes {
    var data: [UInt8]
    var i = 0
    mutating func next() -> UInt8? { guard i < data.count else { return nil }; defer { i += 1 }; return data[i] }
    mutating func byte() -> UInt8 { next() ?? 0 }
    var atEnd: Bool { i >= data.count }
}

func value(_ b: inout Bytes, depth: Int) -> JSON {
    switch b.byte() % (depth > 3 ? 6 : 9) {
    case 0: return .null
    case 1: return .bool(b.byte() & 1 == 1)
    case 2: return .int(Int64(Int8(bitPattern: b.byte())) * Int64(b.byte()) * 1000)
    case 3: return .double(Double(Int8(bitPattern: b.byte())) / 7)
    case 4, 5: return .string(enumValues[Int(b.byte()) % enumValues.count])
    case 6: return .array((0..<Int(b.byte() % 4)).map { _ in value(&b, depth: depth + 1) })
    default: return object(&b, depth: depth + 1)
    }
}

func object(_ b: inout Bytes, depth: Int) -> JSON {
    var o: [String: JSON] = [:]
    for _ in 0..<Int(b.byte() % 6) {
        o[fieldNames[Int(b.byte()) % fieldNames.count]] = value(&b, depth: depth)
    }
    return .object(o)
}

/// Sends text and collects replies. Async handlers (durable writes) answer
/// when the store commits at the end of a loop turn; with no stdio keeping the
/// loop alive, the turn end is the store's `flush()` (what its loop hook calls).
func exchange(_ client: InProcessClient, _ env: ServerEnvironment, _ text: String, expect: Set<Int64>) -> [JSON] {
    var replies = client.messages(client.send(text))
    var turns = 0
    func answered() -> Bool {
        let ids = Set(replies.compactMap { $0["method"] == nil ? $0["id"]?.intValue : nil })
        return expect.isSubset(of: ids)
    }
    while !answered() && turns < 3 {
        env.store?.flush()
        _ = env.loop.runOnce()
        replies += client.messages(client.takeOutput())
        turns += 1
    }
    return replies
}

func check(_ replies: [JSON], expectIds: Set<Int64>, uniqueIds: Bool = true, _ what: @autoclosure () -> String = "") {
    var seen = Set<Int64>()
    for m in replies {
        if m["method"] != nil { continue }            // server->client notification
        guard case .object(let o) = m, o["jsonrpc"] == "2.0" else { fatalError("malformed reply \(m.serialized())") }
        if let e = o["error"] {
            guard let code = e["code"]?.intValue, e["message"]?.stringValue != nil else { fatalError("bad error \(m.serialized())") }
            let standard: Set<Int64> = [-32700, -32600, -32601, -32602, -32603, -32002]
            guard standard.contains(code) || (-32099 ... -32000).contains(code) else { fatalError("bad error code \(code)") }
            if (-32099 ... -32000).contains(code), e["data"]?.objectValue == nil { fatalError("application error without data \(m.serialized())") }
        } else if o["result"] == nil {
            fatalError("reply without result or error \(m.serialized())")
        }
        if let id = o["id"]?.intValue, !seen.insert(id).inserted, uniqueIds { fatalError("two replies for id \(id)") }
    }
    for id in expectIds where !seen.contains(id) { fatalError("no reply for id \(id): \(what())") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    var options = ServerOptions()
    options.manualClock = true
    options.ephemeral = true
    options.logLevel = .error
    options.maxMessageBytes = 1 << 16
    Log.level = .error
    let env = ServerEnvironment(loop: EventLoop(), options: options)
    guard let server = try? RPCServer(env: env) else { fatalError("server did not start") }
    let client = server.makeInProcessClient()
    check(client.request("initialize", ["capabilities": [:]]), expectIds: [1])
    _ = client.notify("initialized", [:])
    var bytes = Bytes(data: Array(UnsafeBufferPointer(start: data, count: size)))
    let methods = server.methods.methodNames + RPCServer.builtins.filter { $0 != "exit" && $0 != "shutdown" }
    if bytes.byte() & 1 == 0 {
        // Raw text: replies are only checked for shape (ids are the input's own
        // and may repeat).
        let text = String(decoding: bytes.data[1...], as: UTF8.self)
        check(exchange(client, env, text + "\n", expect: []), expectIds: [], uniqueIds: false)
    } else {
        var id: Int64 = 2
        while !bytes.atEnd {
            let m = methods[Int(bytes.byte()) % methods.count]
            if m == "exit" || m == "shutdown" { continue }
            let params: JSON = bytes.byte() % 8 == 0 ? value(&bytes, depth: 0) : object(&bytes, depth: 0)
            let msg: JSON = ["jsonrpc": "2.0", "id": .int(id), "method": .string(m), "params": params]
            let text = msg.serialized()
            check(exchange(client, env, text + "\n", expect: [id]), expectIds: [id], text)
            id += 1
        }
    }
    // Still serving.
    let pong = exchange(client, env, "{\"jsonrpc\":\"2.0\",\"id\":\"alive\",\"method\":\"ping\"}\n", expect: [])
    guard pong.contains(where: { $0["id"] == "alive" && $0["result"] != nil }) else { fatalError("server stopped answering") }
    return 0
}

#if !CB_FUZZ
// Built by Tests/fuzz/dispatch/run.sh with --sanitize=fuzzer and -DCB_FUZZ,
// libFuzzer brings main() and calls LLVMFuzzerTestOneInput. In a plain
// `swift build` this main replays the files given as arguments through the
// same entry point, so regression inputs run anywhere.
@main
struct FuzzDispatchMain {
    static func main() {
        for path in CommandLine.arguments.dropFirst() {
            guard let f = fopen(path, "rb") else { fputs("cannot open \(path)\n", stderr); exit(2) }
            var bytes: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = fread(&buf, 1, buf.count, f)
                if n <= 0 { break }
                bytes += buf[0..<n]
            }
            fclose(f)
            _ = bytes.withUnsafeBufferPointer { fuzz($0.baseAddress, $0.count) }
            print("ok \(path)")
        }
    }
}
#endif
