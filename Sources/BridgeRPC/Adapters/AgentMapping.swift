import BridgeCore
import BridgeEngine

/// What one raw agent message (a Claude Code hook input, a stream-json line,
/// a claudecodeui frame) means to the engine. The adapters only translate:
/// every rule (what is noisy, what is shown where) stays in BridgeEngine.
///
/// Two kinds of trouble are kept apart on purpose:
/// - the envelope is malformed (not an object, no session id, a field of the
///   wrong type): the sender has a bug, so it gets a -32602 naming the field;
/// - something is merely unknown (a new hook event, a new stream-json line
///   type, a tool input field in a shape we don't read): agents change faster
///   than we do, so that part is ignored with a reason and a debug log, and
///   the session keeps going.
public struct AgentMapping: Equatable {
    /// The agent's message kind as sent ("PreToolUse", "assistant", "claude-complete").
    public var kind: String
    public var sessionId: String?
    public var events: [EngineEvent] = []
    /// Why (parts of) the message changed nothing.
    public var ignored: [String] = []
    /// Fields of the agent's object that nothing reads (debug log).
    public var unusedFields: [String] = []
    /// A permission request the sender waits on (hook PermissionRequest).
    public var approvalRequestId: String?

    public init(kind: String, sessionId: String?) {
        self.kind = kind
        self.sessionId = sessionId
    }

    /// Native event type names, in order (the result's `events`).
    public var eventNames: [String] {
        events.map {
            switch $0 {
            case .agent(let a): return a.kind.typeName
            case .questionAnswer: return "question_answered"
            // Adapters make only the two above; other engine events (app,
            // settings, connection, ...) are named generically.
            default: return "other"
            }
        }
    }

    /// Fields we do not read are expected (agents add fields all the
    /// time); they are named in the debug log so a format change is visible.
    mutating func noteUnusedFields(_ o: [String: JSON], known: Set<String>) {
        unusedFields = o.keys.filter { !known.contains($0) }.sorted()
    }

    mutating func ignore(_ reason: String) { ignored.append(reason) }
}

/// Makes request ids for approvals that arrive without one (hook
/// PermissionRequest has no id of its own). A random prefix per server keeps
/// ids unique across restarts, since resolved ids are remembered.
public struct AgentIdSource {
    private let prefix: String
    private var n: UInt64 = 0
    public init(prefix: String? = nil) {
        self.prefix = prefix ?? String(UInt32.random(in: 0...UInt32.max), radix: 36)
    }
    public mutating func next(_ kind: String) -> String {
        n &+= 1
        return "\(kind)-\(prefix)-\(n)"
    }
}

/// Envelope checks shared by the three adapters; each failure is a -32602
/// whose data names the field, the type expected and the type received.
enum AgentFields {
    static func bad(_ field: String, _ expected: String, _ got: JSON?, _ source: String) -> RPCError {
        let gotName = got?.typeName ?? "missing"
        let what = got == nil ? "missing '\(field)'" : "'\(field)' must be \(expected)"
        return .invalidParams("invalid params: \(what) (\(source))",
                              data: ["param": .string(field), "expected": .string(expected), "got": .string(gotName),
                                     "source": .string(source)])
    }

    static func object(_ raw: JSON?, _ source: String) throws -> [String: JSON] {
        guard let raw, let o = raw.objectValue else {
            throw RPCError.invalidParams("invalid params: a \(source) must be a JSON object",
                                         data: ["expected": "object", "got": .string(raw?.typeName ?? "missing"),
                                                "source": .string(source)])
        }
        return o
    }

    static func requiredString(_ o: [String: JSON], _ key: String, _ source: String) throws -> String {
        guard let v = o[key], v != .null else { throw bad(key, "non-empty string", nil, source) }
        guard let s = v.stringValue, !s.isEmpty else { throw bad(key, "non-empty string", v, source) }
        return s
    }

    static func optionalString(_ o: [String: JSON], _ key: String, _ source: String) throws -> String? {
        guard let v = o[key], v != .null else { return nil }
        guard let s = v.stringValue else { throw bad(key, "string", v, source) }
        return s
    }

    static func optionalObject(_ o: [String: JSON], _ key: String, _ source: String) throws -> [String: JSON]? {
        guard let v = o[key], v != .null else { return nil }
        guard let x = v.objectValue else { throw bad(key, "object", v, source) }
        return x
    }

    static func optionalArray(_ o: [String: JSON], _ key: String, _ source: String) throws -> [JSON]? {
        guard let v = o[key], v != .null else { return nil }
        guard let x = v.arrayValue else { throw bad(key, "array", v, source) }
        return x
    }

    static func optionalBool(_ o: [String: JSON], _ key: String, _ source: String) throws -> Bool? {
        guard let v = o[key], v != .null else { return nil }
        guard let x = v.boolValue else { throw bad(key, "boolean", v, source) }
        return x
    }
}

/// Tool calls as Claude Code reports them (`tool_name` + `tool_input`, or a
/// stream-json `tool_use` block), shared by all three adapters. Tool inputs
/// are defined by the tools (MCP servers included), so fields are read
/// leniently: a field in a shape we don't know is skipped, never an error.
enum ToolCalls {
    static func string(_ input: [String: JSON], _ keys: String...) -> String? {
        for k in keys { if let s = input[k]?.stringValue, !s.isEmpty { return s } }
        return nil
    }

    static func toolUse(name: String, input: [String: JSON]) -> ToolUse {
        ToolUse(name: name,
                command: string(input, "command"),
                filePath: string(input, "file_path", "notebook_path", "path"),
                pattern: string(input, "pattern"),
                url: string(input, "url", "query"),
                description: string(input, "description", "prompt", "plan"))
    }

    static func todos(_ input: [String: JSON], into m: inout AgentMapping) -> [Todo]? {
        guard let arr = input["todos"]?.arrayValue else {
            m.ignore("TodoWrite without a todos array")
            return nil
        }
        var out: [Todo] = []
        for (i, v) in arr.enumerated() {
            guard let content = v["content"]?.stringValue,
                  let st = v["status"]?.stringValue, let status = Todo.State(rawValue: st) else {
                m.ignore("todos[\(i)] lacks content or a known status")
                continue
            }
            out.append(Todo(content: content, status: status, activeForm: v["activeForm"]?.stringValue))
        }
        return out
    }

    static func questions(_ input: [String: JSON], into m: inout AgentMapping) -> [Question]? {
        guard let arr = input["questions"]?.arrayValue, !arr.isEmpty else {
            m.ignore("AskUserQuestion without questions")
            return nil
        }
        var out: [Question] = []
        for (i, v) in arr.enumerated() {
            guard let q = v["question"]?.stringValue, !q.isEmpty else {
                m.ignore("questions[\(i)] has no question text")
                continue
            }
            let options = (v["options"]?.arrayValue ?? []).compactMap { o -> Question.Option? in
                guard let label = o["label"]?.stringValue else { return nil }
                return Question.Option(label: label, description: o["description"]?.stringValue)
            }
            out.append(Question(question: q, header: v["header"]?.stringValue, options: options,
                                multiSelect: v["multiSelect"]?.boolValue ?? false))
        }
        return out.isEmpty ? nil : out
    }

    /// One tool call -> the engine's event: TodoWrite is progress,
    /// AskUserQuestion a question (its id = the tool use id), anything else
    /// an operation line.
    static func map(name: String, input: [String: JSON], toolUseId: String?, sessionId: String, projectPath: String?,
                    ids: inout AgentIdSource, into m: inout AgentMapping) {
        func add(_ k: AgentEvent.Kind) {
            m.events.append(.agent(AgentEvent(sessionId: sessionId, kind: k, projectPath: projectPath)))
        }
        switch name {
        case "TodoWrite":
            if let todos = todos(input, into: &m) { add(.progress(todos: todos)) }
        case "AskUserQuestion":
            if let qs = questions(input, into: &m) { add(.question(questionId: toolUseId ?? ids.next("question"), questions: qs)) }
        default:
            add(.toolUse(toolUse(name: name, input: input)))
        }
    }

    /// Answers to an AskUserQuestion as Claude Code reports them after the
    /// person answered in the terminal: an `answers` object (question text ->
    /// label(s)), or the tool result text `... "Question"="Answer", ...`.
    static func answers(from v: JSON?) -> [String: [String]] {
        guard let v else { return [:] }
        if let o = v["answers"]?.objectValue {
            var out: [String: [String]] = [:]
            for (k, a) in o {
                if let s = a.stringValue { out[k] = [s] }
                else if let arr = a.arrayValue { out[k] = arr.compactMap(\.stringValue) }
            }
            return out
        }
        if let s = v.stringValue { return answers(fromText: s) }
        if let arr = v.arrayValue {
            // tool_result content blocks: [{type: text, text}]
            let text = arr.compactMap { $0["text"]?.stringValue }.joined(separator: "\n")
            return answers(fromText: text)
        }
        return [:]
    }

    /// `"Which database?"="SQLite", "Scope?"="tests, docs"` -> pairs. Quotes
    /// inside a question are not escaped by Claude Code, so a pair is
    /// recognised by the `"="` between its halves.
    static func answers(fromText text: String) -> [String: [String]] {
        let b = Array(text.utf8)
        let q = UInt8(ascii: "\""), eq = UInt8(ascii: "=")
        var out: [String: [String]] = [:]
        var i = 0, segmentStart = 0
        while i + 2 < b.count {
            guard b[i] == q, b[i + 1] == eq, b[i + 2] == q else { i += 1; continue }
            // the question opens at the last quote before `"="` (after the previous pair)
            var open = i - 1
            while open >= segmentStart && b[open] != q { open -= 1 }
            var close = i + 3
            while close < b.count && b[close] != q { close += 1 }
            guard open >= segmentStart, close < b.count else { break }
            out[String(decoding: b[(open + 1)..<i], as: UTF8.self)] = [String(decoding: b[(i + 3)..<close], as: UTF8.self)]
            i = close + 1
            segmentStart = i
        }
        return out
    }
}
