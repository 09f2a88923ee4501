import BridgeCore
import BridgeEngine

/// claudecodeui (siteboon/claudecodeui) WebSocket frames, server -> browser.
/// Both generations are read: the legacy `type` frames and the normalized
/// `kind` frames of newer releases.
/// - `session-created` {sessionId} / `session_created` {newSessionId}:
///   a run started -> task_started
/// - `claude-permission-request` / `permission_request` {requestId,
///   toolName, input} -> approval_request (the bridge relays
///   `approval.resolved` back as claudecodeui's permission response)
/// - `claude-permission-cancelled` / `permission_cancelled` {requestId,
///   reason}: reason "timeout" -> approval_timeout, else approval_cancelled
/// - `claude-complete` / `complete` {exitCode, aborted?}: 0 -> task_completed,
///   otherwise task_failed; aborted -> task_completed "Stopped"
/// - `claude-error` {error} / `error` {content} -> task_failed
/// - `claude-response` {data: stream-json message} -> as agent.streamJson;
///   `tool_use` {toolName, toolInput, toolId} -> tool_use / progress / question
/// - anything else (token budget, projects_updated, status): ignored
public enum ClaudeCodeUIAdapter {
    static let source = "claudecodeui frame"
    static let aliases: [String: String] = [
        "session-created": "session_created", "session_created": "session_created",
        "claude-permission-request": "permission_request", "permission_request": "permission_request",
        "claude-permission-cancelled": "permission_cancelled", "permission_cancelled": "permission_cancelled",
        "claude-complete": "complete", "complete": "complete",
        "claude-error": "error", "error": "error",
        "claude-response": "response",
        "tool_use": "tool_use",
    ]
    public static var knownFrames: [String] { aliases.keys.sorted() }

    public static func map(_ raw: JSON?, engine: Engine, ids: inout AgentIdSource) throws -> AgentMapping {
        let o = try AgentFields.object(raw, source)
        let name: String
        if o["type"] != nil && o["type"] != .null { name = try AgentFields.requiredString(o, "type", source) }
        else if o["kind"] != nil && o["kind"] != .null { name = try AgentFields.requiredString(o, "kind", source) }
        else { throw AgentFields.bad("type", "non-empty string (or 'kind')", nil, source) }
        guard let frame = aliases[name] else {
            var m = AgentMapping(kind: name, sessionId: o["sessionId"]?.stringValue)
            m.ignore("unknown claudecodeui frame '\(name)'")
            return m
        }
        if frame == "response" {
            let fallback = try AgentFields.optionalString(o, "sessionId", source)
            var m = try StreamJSONAdapter.map(o["data"], engine: engine, ids: &ids, sessionFallback: fallback)
            m.kind = "\(name):\(m.kind)"
            return m
        }
        let sid: String
        if frame == "session_created", let n = try AgentFields.optionalString(o, "newSessionId", source), !n.isEmpty { sid = n }
        else { sid = try AgentFields.requiredString(o, "sessionId", source) }
        var m = AgentMapping(kind: name, sessionId: sid)
        m.noteUnusedFields(o, known: ["type", "kind", "sessionId", "newSessionId", "requestId", "toolName", "input",
                                      "toolInput", "toolId", "reason", "exitCode", "aborted", "error", "content",
                                      "projectPath", "cwd", "provider", "id", "timestamp"])
        let path = try AgentFields.optionalString(o, "projectPath", source) ?? AgentFields.optionalString(o, "cwd", source)
        func add(_ k: AgentEvent.Kind) {
            m.events.append(.agent(AgentEvent(sessionId: sid, kind: k, projectPath: path)))
        }
        switch frame {
        case "session_created":
            add(.taskStarted(prompt: nil))
        case "permission_request":
            add(try permissionRequest(o))
        case "permission_cancelled":
            let rid = try AgentFields.requiredString(o, "requestId", source)
            let reason = try AgentFields.optionalString(o, "reason", source)
            add(reason == "timeout" ? .approvalTimeout(requestId: rid) : .approvalCancelled(requestId: rid))
        case "complete":
            add(try complete(o))
        case "error":
            let text = try AgentFields.optionalString(o, "error", source) ?? AgentFields.optionalString(o, "content", source)
            add(.taskFailed(error: text))
        default: // tool_use (normalized)
            let tool = try AgentFields.requiredString(o, "toolName", source)
            let input = try AgentFields.optionalObject(o, "toolInput", source) ?? [:]
            ToolCalls.map(name: tool, input: input, toolUseId: try AgentFields.optionalString(o, "toolId", source),
                          sessionId: sid, projectPath: path, ids: &ids, into: &m)
        }
        return m
    }

    private static func permissionRequest(_ o: [String: JSON]) throws -> AgentEvent.Kind {
        let rid = try AgentFields.requiredString(o, "requestId", source)
        let tool = try AgentFields.optionalString(o, "toolName", source) ?? "UnknownTool"
        let input: [String: JSON]
        switch o["input"] {
        case .object(let x)?: input = x
        case .string(let s)?: input = ["command": .string(s)] // frames that carry only the command text
        default: input = [:]
        }
        return .approvalRequest(requestId: rid, tool: ToolCalls.toolUse(name: tool, input: input), timeoutSeconds: nil)
    }

    private static func complete(_ o: [String: JSON]) throws -> AgentEvent.Kind {
        let code = o["exitCode"]?.intValue
        if let v = o["exitCode"], v != .null, code == nil { throw AgentFields.bad("exitCode", "integer", v, source) }
        if try AgentFields.optionalBool(o, "aborted", source) == true { return .taskCompleted(summary: "Stopped") }
        if let code, code != 0 { return .taskFailed(error: "Claude exited with code \(code)") }
        return .taskCompleted(summary: nil)
    }
}
