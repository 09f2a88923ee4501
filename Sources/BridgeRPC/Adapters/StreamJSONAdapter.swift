import BridgeCore
import BridgeEngine

/// One line of `claude -p --output-format stream-json` (also what the Agent
/// SDK yields). Every line has `type` and `session_id`:
/// - `system`/`init` {cwd, model, tools, ...} -> task_started (a `-p` run
///   starts working at once); other system subtypes are ignored
/// - `assistant` {message: {content: [blocks]}}: each `tool_use` block
///   {id, name, input} -> tool_use / progress (TodoWrite) / question
///   (AskUserQuestion, id = block id); text and thinking blocks are ignored
/// - `user` {message: {content: [blocks]}}: a `tool_result` for a pending
///   AskUserQuestion answers it; other tool results are ignored
/// - `result` {subtype, is_error, result, errors?}: success -> task_completed
///   (summary = result text); error_* or is_error -> task_failed
/// - anything else (stream_event, new types): ignored
public enum StreamJSONAdapter {
    static let source = "stream-json line"
    public static let knownTypes = ["system", "assistant", "user", "result"]

    public static func map(_ raw: JSON?, engine: Engine, ids: inout AgentIdSource,
                           sessionFallback: String? = nil) throws -> AgentMapping {
        let o = try AgentFields.object(raw, source)
        let type = try AgentFields.requiredString(o, "type", source)
        let subtype = try AgentFields.optionalString(o, "subtype", source)
        let kind = subtype.map { "\(type)/\($0)" } ?? type
        guard knownTypes.contains(type) else {
            var m = AgentMapping(kind: kind, sessionId: o["session_id"]?.stringValue ?? sessionFallback)
            m.ignore("unknown stream-json type '\(type)'")
            return m
        }
        let sid: String
        if o["session_id"] == nil || o["session_id"] == .null, let fb = sessionFallback, !fb.isEmpty { sid = fb }
        else { sid = try AgentFields.requiredString(o, "session_id", source) }
        var m = AgentMapping(kind: kind, sessionId: sid)
        m.noteUnusedFields(o, known: ["type", "subtype", "session_id", "cwd", "message", "parent_tool_use_id",
                                      "is_error", "result", "errors", "uuid"])
        let cwd = try AgentFields.optionalString(o, "cwd", source)
        func add(_ k: AgentEvent.Kind) {
            m.events.append(.agent(AgentEvent(sessionId: sid, kind: k, projectPath: cwd)))
        }
        switch type {
        case "system":
            if subtype == "init" { add(.taskStarted(prompt: nil)) }
            else { m.ignore("system/\(subtype ?? "?"): nothing to show") }
        case "assistant":
            try toolCalls(o, sid: sid, cwd: cwd, ids: &ids, into: &m)
        case "user":
            try answers(o, pending: Set(engine.session(sid)?.pendingQuestions.map(\.questionId) ?? []), into: &m)
        default: // result
            let isError = try AgentFields.optionalBool(o, "is_error", source) ?? false
            let text = try AgentFields.optionalString(o, "result", source)
            if subtype == "success" && !isError {
                add(.taskCompleted(summary: text))
            } else {
                let errors = (o["errors"]?.arrayValue ?? []).compactMap(\.stringValue)
                add(.taskFailed(error: errors.first ?? text ?? subtype.map { "Claude stopped: \($0)" }))
            }
        }
        return m
    }

    private static func blocks(_ o: [String: JSON]) throws -> [JSON] {
        guard let msg = try AgentFields.optionalObject(o, "message", source) else {
            throw AgentFields.bad("message", "object", nil, source)
        }
        switch msg["content"] {
        case .array(let a)?: return a
        case .string?, .null?, nil: return [] // plain text content
        case let other?: throw AgentFields.bad("message.content", "array or string", other, source)
        }
    }

    /// An assistant message: its tool calls.
    private static func toolCalls(_ o: [String: JSON], sid: String, cwd: String?, ids: inout AgentIdSource,
                                  into m: inout AgentMapping) throws {
        for (i, b) in try blocks(o).enumerated() {
            guard b["type"]?.stringValue == "tool_use" else { continue }
            guard let name = b["name"]?.stringValue, !name.isEmpty else {
                m.ignore("content[\(i)]: tool_use without a name")
                continue
            }
            ToolCalls.map(name: name, input: b["input"]?.objectValue ?? [:], toolUseId: b["id"]?.stringValue,
                          sessionId: sid, projectPath: cwd, ids: &ids, into: &m)
        }
        if m.events.isEmpty && m.ignored.isEmpty { m.ignore("assistant text only") }
    }

    /// A user message: tool results that answer a pending question.
    private static func answers(_ o: [String: JSON], pending: Set<String>, into m: inout AgentMapping) throws {
        for b in try blocks(o) where b["type"]?.stringValue == "tool_result" {
            guard let id = b["tool_use_id"]?.stringValue, pending.contains(id) else { continue }
            let answers = ToolCalls.answers(from: b["content"])
            if answers.isEmpty { m.ignore("tool_result for question \(id) carries no answers we can read") }
            else { m.events.append(.questionAnswer(questionId: id, answers: answers, deviceId: "terminal")) }
        }
        if m.events.isEmpty && m.ignored.isEmpty { m.ignore("tool results: the operation line already shows the tool") }
    }
}
