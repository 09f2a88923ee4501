import BridgeCore
import BridgeEngine

/// Claude Code hook input (the JSON a hook command reads on stdin):
/// common fields `session_id`, `transcript_path`, `cwd`, `permission_mode`,
/// `hook_event_name`, plus per event `prompt` (UserPromptSubmit),
/// `tool_name`/`tool_input`/`tool_use_id` (PreToolUse, PostToolUse,
/// PermissionRequest), `permission_suggestions` (PermissionRequest),
/// `tool_response` (PostToolUse), `message`/
/// `notification_type` (Notification), `source` (SessionStart), `reason`
/// (SessionEnd), `stop_hook_active` (Stop, SubagentStop).
///
/// Mapping (the engine decides what the person sees):
/// - UserPromptSubmit -> task_started (processing); a PermissionRequest of
///   this session still waiting is cancelled first (the turn it belonged to is over)
/// - PreToolUse -> tool_use (operation text); TodoWrite -> progress;
///   AskUserQuestion -> question (id = tool_use_id; `agent.hook` then waits
///   for its answer when someone can answer, and hands it back as updatedInput)
/// - PostToolUse AskUserQuestion -> the question is answered (at the terminal);
///   PostToolUse of a tool whose PermissionRequest is still pending -> that
///   approval is cancelled (it was granted in Claude Code's own prompt)
/// - PermissionRequest -> approval_request with its permission suggestions
///   (offered as "Always allow"); the hook waits for the decision
///   (AskUserQuestion's own prompt is left to Claude Code: it is a question)
/// - Stop -> task_completed; SessionEnd while running -> task_completed
/// - SessionStart, Notification, SubagentStop, PostToolUse of other tools,
///   PreCompact and unknown events: ignored (state comes from the events above)
public enum ClaudeHookAdapter {
    static let source = "Claude Code hook input"
    public static let knownEvents = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest",
                                     "Notification", "Stop", "SubagentStop", "SessionEnd", "PreCompact"]

    static let knownFields: Set<String> = [
        "session_id", "transcript_path", "cwd", "permission_mode", "hook_event_name", "prompt", "tool_name",
        "tool_input", "tool_use_id", "tool_response", "message", "notification_type", "source", "reason",
        "stop_hook_active", "last_assistant_message", "timeoutSeconds", "permission_suggestions"]

    public static func map(_ raw: JSON?, engine: Engine, ids: inout AgentIdSource) throws -> AgentMapping {
        let o = try AgentFields.object(raw, source)
        let event = try AgentFields.requiredString(o, "hook_event_name", source)
        guard knownEvents.contains(event) else {
            var m = AgentMapping(kind: event, sessionId: o["session_id"]?.stringValue)
            m.ignore("unknown hook event '\(event)'")
            return m
        }
        var h = try HookInput(o, event: event)
        switch event {
        case "UserPromptSubmit": try h.userPromptSubmit(engine)
        case "PreToolUse":
            let t = try h.tool()
            ToolCalls.map(name: t.name, input: t.input, toolUseId: t.id, sessionId: h.sid, projectPath: h.cwd, ids: &ids, into: &h.m)
        case "PostToolUse": try h.postToolUse(engine)
        case "PermissionRequest": try h.permissionRequest(&ids)
        case "Stop":
            _ = try AgentFields.optionalBool(o, "stop_hook_active", source)
            h.add(.taskCompleted(summary: try AgentFields.optionalString(o, "last_assistant_message", source)))
        case "SessionEnd": try h.sessionEnd(engine)
        case "Notification":
            _ = try AgentFields.optionalString(o, "message", source)
            h.m.ignore("Notification: informational (approvals come from PermissionRequest, completion from Stop)")
        case "SessionStart":
            _ = try AgentFields.optionalString(o, "source", source)
            h.m.ignore("SessionStart: the session shows once a prompt is submitted")
        case "SubagentStop":
            h.m.ignore("SubagentStop: the main agent is still working")
        default: // PreCompact
            h.m.ignore("\(event): nothing to show")
        }
        return h.m
    }

    /// One hook input being mapped: its session, its working directory and
    /// the mapping so far.
    private struct HookInput {
        let o: [String: JSON]
        let sid: String
        let cwd: String?
        var m: AgentMapping

        init(_ o: [String: JSON], event: String) throws {
            self.o = o
            sid = try AgentFields.requiredString(o, "session_id", source)
            cwd = try AgentFields.optionalString(o, "cwd", source)
            _ = try AgentFields.optionalString(o, "transcript_path", source)
            m = AgentMapping(kind: event, sessionId: sid)
            m.noteUnusedFields(o, known: knownFields)
        }

        mutating func add(_ k: AgentEvent.Kind) {
            m.events.append(.agent(AgentEvent(sessionId: sid, kind: k, projectPath: cwd)))
        }

        func tool() throws -> (name: String, input: [String: JSON], id: String?) {
            let name = try AgentFields.requiredString(o, "tool_name", source)
            let input = try AgentFields.optionalObject(o, "tool_input", source) ?? [:]
            let id = try AgentFields.optionalString(o, "tool_use_id", source)
            return (name, input, id)
        }

        mutating func userPromptSubmit(_ engine: Engine) throws {
            let prompt = try AgentFields.optionalString(o, "prompt", source)
            // A new prompt means the last turn is over (the person interrupted
            // it or answered in the terminal): nothing waits for a permission.
            for a in engine.session(sid)?.pendingApprovals ?? [] where a.requestId.hasPrefix("hook-") {
                add(.approvalCancelled(requestId: a.requestId))
            }
            add(.taskStarted(prompt: prompt))
        }

        mutating func postToolUse(_ engine: Engine) throws {
            let t = try tool()
            let session = engine.session(sid)
            if t.name == "AskUserQuestion", let qid = t.id,
               session?.pendingQuestions.contains(where: { $0.questionId == qid }) == true {
                let answers = ToolCalls.answers(from: o["tool_response"])
                if answers.isEmpty { m.ignore("AskUserQuestion result carries no answers we can read") }
                else { m.events.append(.questionAnswer(questionId: qid, answers: answers, deviceId: "terminal")) }
            } else if let stale = session?.pendingApprovals.filter({ isHookRequest($0, for: t.name, t.input) }), !stale.isEmpty {
                // The tool ran, so its permission was granted in Claude Code's
                // own prompt: the phone must stop asking.
                for a in stale { add(.approvalCancelled(requestId: a.requestId)) }
            } else {
                m.ignore("PostToolUse: the operation line already shows \(t.name)")
            }
        }

        mutating func permissionRequest(_ ids: inout AgentIdSource) throws {
            let t = try tool()
            guard t.name != "AskUserQuestion" else {
                // A question, not a permission: the question event came with
                // PreToolUse; Claude Code's own prompt collects the answer.
                return m.ignore("PermissionRequest for AskUserQuestion: answered in Claude Code's prompt")
            }
            let suggestions = try permissionSuggestions()
            let rid = ids.next("hook")
            add(.approvalRequest(requestId: rid, tool: ToolCalls.toolUse(name: t.name, input: t.input), timeoutSeconds: nil,
                                 permissionSuggestions: suggestions))
            m.approvalRequestId = rid
        }

        /// `permission_suggestions`: what "Always allow" would hand back. Not
        /// an array: the sender's bug (-32602). Items we cannot keep (not an
        /// object, over 4 KB, past the 16th) are left out, said in `ignored`:
        /// the approval itself still stands.
        mutating func permissionSuggestions() throws -> [JSON] {
            guard let all = try AgentFields.optionalArray(o, "permission_suggestions", source) else { return [] }
            var kept: [JSON] = []
            for (i, s) in all.enumerated() {
                if let why = ApprovalRequest.problem(withSuggestion: s) {
                    m.ignore("permission_suggestions[\(i)] \(why): not offered")
                } else if kept.count == ApprovalRequest.maxPermissionSuggestions {
                    m.ignore("permission_suggestions[\(i)]: only the first \(ApprovalRequest.maxPermissionSuggestions) are offered")
                } else {
                    kept.append(s)
                }
            }
            return kept
        }

        mutating func sessionEnd(_ engine: Engine) throws {
            let reason = try AgentFields.optionalString(o, "reason", source) ?? "other"
            if let s = engine.session(sid), [.processing, .awaitingApproval, .awaitingAnswer].contains(s.status) {
                add(.taskCompleted(summary: "Session ended (\(reason))"))
            } else {
                m.ignore("SessionEnd: the session is not running")
            }
        }
    }

    /// A pending approval this adapter made for the same tool call.
    static func isHookRequest(_ a: ApprovalRequest, for name: String, _ input: [String: JSON]) -> Bool {
        a.requestId.hasPrefix("hook-") && a.tool == ToolCalls.toolUse(name: name, input: input)
    }

    /// What the hook prints for Claude Code (PermissionRequest decision
    /// control): allow (with "Always allow": `updatedPermissions`, the
    /// request's permission suggestions), or deny with a message Claude reads
    /// (the person's own, else ours) and `interrupt` for "Deny and stop".
    /// nil: print nothing, so Claude Code asks in its own prompt.
    public static func decisionOutput(_ resolution: ApprovalResolution?, by: String?, options: DecisionOptions = .none,
                                      permissionSuggestions: [JSON] = []) -> JSON? {
        var decision: [String: JSON]
        switch resolution {
        case .allow?:
            decision = ["behavior": "allow"]
            if options.alwaysAllow, !permissionSuggestions.isEmpty { decision["updatedPermissions"] = .array(permissionSuggestions) }
        case .deny?:
            let who = by.map { " (\($0))" } ?? ""
            decision = ["behavior": "deny", "message": .string(options.message ?? "Denied by the user from CodingBridge\(who).")]
            if options.interrupt { decision["interrupt"] = true }
        default:
            return nil
        }
        return ["hookSpecificOutput": ["hookEventName": "PermissionRequest", "decision": .object(decision)]]
    }
}
