import BridgeCore
import BridgeEngine
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

// libFuzzer target over the whole method dispatch: every input becomes a
// sequence of JSON-RPC messages sent to a fresh, real server (in-process
// client, manual clock, in-memory store). The oracle: nothing crashes (ASan),
// every request with an id gets exactly one well-formed response (a hook's
// PermissionRequest once its approval times out on the manual clock), error codes
// are JSON-RPC's or application ones (-32000...-32099) with a `data` object,
// and the server still answers `ping` afterwards.
//
// Input format: the first byte picks the mode.
//   even: raw NDJSON text (after initialize): libFuzzer mutates real lines
//         (the corpus and dictionary hold method names and field names).
//   odd:  structured: a working session with an approval and a question
//         pending is set up first (fresh ids each input), then each chunk
//         picks a method and builds its params from rpc-spec/openrpc.json
//         (served by rpc.discover): `$ref`s resolved, nested properties,
//         enums, boundary numbers (0, -1, 2^31, 2^53, the int64 limits, just
//         past minimum/maximum, huge doubles), strings at and past maxLength,
//         empty, long and odd-unicode ones, the live ids, and now and then a
//         wrong type or an unknown name.

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

/// Ids of the responses among `replies` (server->client notifications skipped).
func replyIds(_ replies: [JSON]) -> Set<Int64> {
    Set(replies.compactMap { $0["method"] == nil ? $0["id"]?.intValue : nil })
}

/// Sends text and collects replies. A reply waits for the store's commit of
/// what was written before it; with no stdio keeping the loop alive, the turn
/// end is the store's `flush()` (what its loop hook calls).
func exchange(_ client: InProcessClient, _ env: ServerEnvironment, _ text: String, expect: Set<Int64>) -> [JSON] {
    var replies = client.messages(client.send(text))
    var turns = 0
    while !expect.isSubset(of: replyIds(replies)) && turns < 3 {
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

// MARK: one server for many inputs
//
// Starting a server (loop, in-memory SQLite schema, method table) per input
// costs ~20-50 ms, so one server serves up to
// CB_FUZZ_RESET_EVERY inputs (default 256), each input on a fresh connection
// (so framing detection starts over); it is replaced early when an input
// changed the lifecycle (shutdown/exit) or the server stopped answering.
// Reproducibility: with CB_FUZZ_FRESH=1 (run.sh's replay) every input gets a
// fresh server. Because a crash may depend on the inputs before it on the same
// server, every input since the last reset is appended to the history file
// (CB_FUZZ_HISTORY, run.sh points it next to the artifacts) in the sequence
// format below; that file replays the exact server state as one input.
//
// Sequence format: "CBSEQ1" then records of [u32 little-endian length][bytes],
// all run on one fresh server.

final class Harness {
    let env: ServerEnvironment
    let server: RPCServer
    /// Params of each method from the live spec (rpc.discover): name -> schema.
    let paramsByMethod: [String: [(String, JSON)]]
    let methods: [String]
    init() {
        var options = ServerOptions()
        options.manualClock = true
        options.ephemeral = true
        options.logLevel = .error
        options.maxMessageBytes = 1 << 16
        env = ServerEnvironment(loop: EventLoop(), options: options)
        guard let s = try? RPCServer(env: env) else { fatalError("server did not start") }
        server = s
        let client = s.makeInProcessClient()
        check(client.request("initialize", ["capabilities": [:]]), expectIds: [1])
        _ = client.notify("initialized", [:])
        methods = s.methods.methodNames + RPCServer.builtins.filter { $0 != "exit" && $0 != "shutdown" }
        paramsByMethod = Harness.specParams(client)
    }

    /// Field names and enum values of every method, read from rpc.discover so
    /// the structured mode follows the contract as it changes.
    static var specCache: [String: [(String, JSON)]]?
    static var specStrings: [String] = []
    static var schemas: [String: JSON] = [:]
    /// Ids of the sessions, approvals and questions `setUpLiveState` opened,
    /// so generated answers hit real state.
    static var liveIds: [String] = ["s1"]

    static func resolve(_ s: JSON) -> JSON {
        guard let ref = s["$ref"]?.stringValue, let name = ref.split(separator: "/").last else { return s }
        return schemas[String(name)] ?? .null
    }

    /// Before a structured input: a working session in the background with an
    /// approval and a question pending, under fresh ids.
    func setUpLiveState(_ client: InProcessClient, serial: Int) {
        let sid = "live\(serial % 4)", rid = "r\(serial)", qid = "q\(serial)"
        Harness.liveIds = [sid, rid, qid, "s1", "phone"]
        let events: [JSON] = [
            ["sessionId": .string(sid), "type": "task_started", "projectName": "MyApp", "projectPath": "/tmp/MyApp"],
            ["sessionId": .string(sid), "type": "approval_request", "requestId": .string(rid), "toolName": "Bash",
             "input": ["command": "npm test"], "timeoutSeconds": 3600],
            ["sessionId": .string(sid), "type": "question", "questionId": .string(qid),
             "questions": [["question": "Which?", "options": [["label": "A"], ["label": "B"]]]]],
        ]
        var text = "{\"jsonrpc\":\"2.0\",\"method\":\"app.update\",\"params\":{\"phase\":\"background\"}}\n"
        for e in events {
            let msg: JSON = ["jsonrpc": "2.0", "method": "agent.event", "params": e]
            text += msg.serialized() + "\n"
        }
        _ = exchange(client, env, text, expect: [])
    }
    static func specParams(_ client: InProcessClient) -> [String: [(String, JSON)]] {
        if let c = specCache { return c }
        var out: [String: [(String, JSON)]] = [:]
        var strings = Set<String>()
        let reply = client.request("rpc.discover")
        if let spec = reply.first(where: { $0["result"] != nil })?["result"] {
            func collect(_ j: JSON) {
                switch j {
                case .object(let o):
                    for (k, v) in o {
                        if k == "enum", case .array(let a) = v { a.compactMap { $0.stringValue }.forEach { strings.insert($0) } }
                        if k == "const", let c = v.stringValue { strings.insert(c) }
                        if k == "properties", case .object(let props) = v { props.keys.forEach { strings.insert($0) } }
                        collect(v)
                    }
                case .array(let a): a.forEach(collect)
                default: break
                }
            }
            if case .array(let ms) = spec["methods"] ?? .null {
                for m in ms {
                    guard let name = m["name"]?.stringValue else { continue }
                    var ps: [(String, JSON)] = []
                    if case .array(let params) = m["params"] ?? .null {
                        for p in params { if let n = p["name"]?.stringValue { ps.append((n, p["schema"] ?? .null)); strings.insert(n) } }
                    }
                    out[name] = ps
                    collect(m["params"] ?? .null)
                }
            }
            collect(spec["components"]?["schemas"] ?? .null)
            schemas = spec["components"]?["schemas"]?.objectValue ?? [:]
        }
        specCache = out
        specStrings = strings.sorted()
        return out
    }
}

/// Numbers at the edges where arithmetic breaks: zero, signs, 32-bit and
/// 53-bit limits, the int64 extremes.
let boundaryInts: [Int64] = [0, -1, 1, 2, 59, 60, 86_400, 86_401, Int64(Int32.max), Int64(Int32.max) + 1,
                             Int64(Int32.min), 1 << 53, (1 << 53) + 1, -(1 << 53), Int64.max, Int64.min, Int64.max - 1]
let boundaryDoubles: [Double] = [0.5, -0.0, 1e308, -1e308, 5e-324, 1.7976931348623157e308, 9.3e18, -9.3e18, 86_400.5]
/// Strings that break naive code: empty, long, NUL, controls, bidi, joined
/// emoji, a lone combining mark, a lone surrogate's replacement.
let oddStrings: [String] = ["", String(repeating: "a", count: 5000), "a\u{0}b", "\u{1}\u{7f}", "\u{202E}evil",
                            "👩‍👩‍👧‍👦", "\u{301}", "\u{FFFD}", "e\u{301}\u{302}\u{303}", "\"\\", "line\nbreak"]

/// A value built from the param's schema: `$ref`s resolved, objects with
/// their declared properties, enums, the declared type at its boundaries
/// (and just past `minimum`/`maximum`/`maxLength`), sometimes anything else.
func schemaValue(_ b: inout Bytes, _ raw: JSON, depth: Int = 0) -> JSON {
    let schema = Harness.resolve(raw)
    let r = b.byte()
    if r % 8 == 0 || depth > 4 { return value(&b, depth: 2) }
    if case .array(let e) = schema["enum"] ?? .null, !e.isEmpty, r % 8 != 1 { return e[Int(b.byte()) % e.count] }
    switch schema["type"]?.stringValue {
    case "string": return .string(schemaString(&b, schema))
    case "integer", "number": return schemaNumber(&b, schema)
    case "boolean": return .bool(b.byte() & 1 == 1)
    case "array":
        return .array((0..<Int(b.byte() % 4)).map { _ in schemaValue(&b, schema["items"] ?? .null, depth: depth + 1) })
    case "object", nil:
        guard case .object(let props) = schema["properties"] ?? .null, !props.isEmpty else { return object(&b, depth: 1) }
        var o: [String: JSON] = [:]
        for (k, v) in props.sorted(by: { $0.key < $1.key }) where b.byte() % 3 != 0 {
            o[k] = schemaValue(&b, v, depth: depth + 1)
        }
        if b.byte() % 16 == 0 { o[fieldNames[Int(b.byte()) % fieldNames.count]] = value(&b, depth: 2) }
        return .object(o)
    default: return value(&b, depth: 1)
    }
}

func schemaString(_ b: inout Bytes, _ schema: JSON) -> String {
    let pool = Harness.specStrings + enumValues
    switch b.byte() % 6 {
    case 0: return oddStrings[Int(b.byte()) % oddStrings.count]
    case 1:
        let n = Int(schema["maxLength"]?.intValue ?? 200) + Int(b.byte() % 2)  // at the limit, one past
        return String(repeating: "é", count: n)
    case 2, 3: return Harness.liveIds[Int(b.byte()) % Harness.liveIds.count]
    default: return pool[Int(b.byte()) % max(pool.count, 1)]
    }
}

func schemaNumber(_ b: inout Bytes, _ schema: JSON) -> JSON {
    let lo = schema["minimum"]?.doubleValue, hi = schema["maximum"]?.doubleValue
    switch b.byte() % 6 {
    case 0: return .int(boundaryInts[Int(b.byte()) % boundaryInts.count])
    case 1: return .double(boundaryDoubles[Int(b.byte()) % boundaryDoubles.count])
    case 2: if let lo { return .double(lo - Double(b.byte() % 2)) }
    case 3: if let hi { return .double(hi + Double(b.byte() % 2)) }
    default: break
    }
    return .int(Int64(Int8(bitPattern: b.byte())) * Int64(b.byte()))
}

/// A year of manual clock fires every connection retry due in it (~700k,
/// one each ~45 s): many seconds under ASan for one input. Generated steps
/// stay within a day; test_time.py takes the year in one step.
func fast(_ method: String, _ params: JSON) -> JSON {
    guard method == "debug.advanceClock", case .object(var o) = params, let ms = o["ms"]?.doubleValue,
          ms > 86_400_000 else { return params }
    o["ms"] = .int(86_400_000)
    return .object(o)
}

var harness: Harness?
var inputsOnServer = 0
let resetEvery = getenv("CB_FUZZ_RESET_EVERY").flatMap { Int(String(cString: $0)) } ?? 256
var freshEachInput = getenv("CB_FUZZ_FRESH") != nil
let historyFile: UnsafeMutablePointer<FILE>? = getenv("CB_FUZZ_HISTORY").flatMap { fopen($0, "w+b") }

func resetServer() {
    harness = nil
    harness = Harness()
    inputsOnServer = 0
    if let h = historyFile {
        _ = ftruncate(fileno(h), 0)
        rewind(h)
        _ = fwrite("CBSEQ1", 1, 6, h)
        fflush(h)
    }
}

func record(_ bytes: ArraySlice<UInt8>) {
    guard let h = historyFile else { return }
    var n = UInt32(bytes.count).littleEndian
    _ = withUnsafeBytes(of: &n) { fwrite($0.baseAddress, 1, 4, h) }
    _ = bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, h) }
    fflush(h)
}

/// One input on the current server, on a connection of its own.
func runOne(_ h: Harness, _ input: ArraySlice<UInt8>) {
    guard !input.isEmpty else { return }
    let client = h.server.makeInProcessClient()
    // The stream's framing is detected from its first bytes: start it as
    // NDJSON, as a client's initialize would.
    _ = client.send("{\"jsonrpc\":\"2.0\",\"id\":\"hello\",\"method\":\"ping\"}\n")
    var bytes = Bytes(data: Array(input))
    if bytes.byte() & 1 == 0 {
        // Raw text: replies are only checked for shape (ids are the input's own
        // and may repeat).
        let text = String(decoding: bytes.data[1...], as: UTF8.self)
        check(exchange(client, h.env, text + "\n", expect: []), expectIds: [], uniqueIds: false)
    } else {
        h.setUpLiveState(client, serial: inputsOnServer)
        var id: Int64 = 2
        while !bytes.atEnd {
            let m = h.methods[Int(bytes.byte()) % h.methods.count]
            let params: JSON
            let shape = bytes.byte()
            if shape % 8 == 0 {
                params = value(&bytes, depth: 0)
            } else if shape % 8 < 5, let ps = h.paramsByMethod[m], !ps.isEmpty {
                // Structure-aware: the method's own params, each present or not.
                var o: [String: JSON] = [:]
                for (name, schema) in ps where bytes.byte() % 3 != 0 { o[name] = schemaValue(&bytes, schema) }
                if bytes.byte() % 16 == 0 { o[fieldNames[Int(bytes.byte()) % fieldNames.count]] = value(&bytes, depth: 1) }
                params = .object(o)
            } else {
                params = object(&bytes, depth: 0)
            }
            let msg: JSON = ["jsonrpc": "2.0", "id": .int(id), "method": .string(m), "params": fast(m, params)]
            let text = msg.serialized()
            var replies = exchange(client, h.env, text + "\n", expect: [id])
            if m == "agent.hook", !replyIds(replies).contains(id) {
                // A PermissionRequest answers only when its approval resolves:
                // past the longest approval timeout it must have (timed out).
                let advance: JSON = ["jsonrpc": "2.0", "id": "clock", "method": "debug.advanceClock",
                                     "params": ["ms": .int(Int64(Settings.approvalTimeoutRange.upperBound) * 1000 + 1000)]]
                replies += exchange(client, h.env, advance.serialized() + "\n", expect: [id])
            }
            check(replies, expectIds: [id], text)
            id += 1
        }
    }
    // Still serving, on the same connection (the stream resynchronised).
    let pong = exchange(client, h.env, "{\"jsonrpc\":\"2.0\",\"id\":\"alive\",\"method\":\"ping\"}\n", expect: [])
    if h.server.phase != .stopped {
        guard pong.contains(where: { $0["id"] == "alive" && $0["result"] != nil }) else { fatalError("server stopped answering") }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let magic = Array("CBSEQ1".utf8)
    if input.count >= 6, Array(input[0..<6]) == magic {
        // A recorded sequence: all of it on one fresh server.
        resetServer()
        var i = 6
        while i + 4 <= input.count {
            let n = Int(input[i]) | Int(input[i + 1]) << 8 | Int(input[i + 2]) << 16 | Int(input[i + 3]) << 24
            i += 4
            let end = min(input.count, i + n)
            runOne(harness!, input[i..<end])
            i = end
            if harness!.server.phase != .running { resetServer() }
        }
        harness = nil
        return 0
    }
    if harness == nil || freshEachInput || inputsOnServer >= resetEvery { resetServer() }
    record(input[...])
    runOne(harness!, input[...])
    inputsOnServer += 1
    if harness!.server.phase != .running { harness = nil }
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
        freshEachInput = true
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
