import BridgeCore
import BridgeEngine

/// Claude Code hook input (the JSON a hook command reads on stdin): common
/// fields `session_id`, `transcript_path`, `cwd`, `permission_mode`,
/// `hook_event_name`, `prompt_id`, `effort`, `model`, `agent_id`/`agent_type`
/// (in a subagent), plus the event's own (docs/claude-cli.md lists what the
/// verified version sends).
///
/// Mapping (the engine decides what the person sees):
/// - UserPromptSubmit -> task_started; a PermissionRequest of this session
///   still waiting is cancelled first (the turn it belonged to is over)
/// - PreToolUse -> tool_use (operation text); TodoWrite -> progress;
///   AskUserQuestion -> question (id = tool_use_id; `agent.hook` then waits
///   for its answer when someone can answer, and hands it back as updatedInput);
///   the Task tools change the plan in their PostToolUse instead
/// - PostToolUse AskUserQuestion -> the question is answered (at the terminal);
///   TaskCreate/TaskUpdate -> progress (ClaudeTaskTools.swift); PostToolUse or
///   PostToolUseFailure of a tool whose PermissionRequest is still pending ->
///   that approval is cancelled (it was decided in Claude Code's own prompt)
/// - PermissionRequest -> approval_request with its permission suggestions
///   (offered as "Always allow"); the hook waits for the decision
///   (AskUserQuestion's own prompt is left to Claude Code: it is a question)
/// - Notification permission_prompt / worker_permission_prompt /
///   agent_needs_input / elicitation_(url_)dialog / idle_prompt -> needs_input (the engine ignores the prompt that merely
///   accompanies our own open request); other types: informational
/// - Elicitation (an MCP server asks in the terminal) -> needs_input
/// - Stop -> task_completed; StopFailure (an API error ended the turn) ->
///   task_failed; SessionEnd while running -> task_completed
/// - the other events of the verified version (SessionStart, SubagentStart/Stop,
///   compaction, config, files, worktrees, TaskCreated/TaskCompleted, ...) and
///   unknown events: ignored (state comes from the events above)
public enum ClaudeHookAdapter {
    static let source = "Claude Code hook input"
    /// Every event Claude Code 2.1.332 sends (docs/claude-cli.md "Hook events this binary knows").
    public static let knownEvents: Set<String> = [
        "PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "PermissionDenied",
        "Notification", "UserPromptSubmit", "UserPromptExpansion", "SessionStart", "SessionEnd", "Setup", "Stop",
        "StopFailure", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "PreModelSwitch", "PostModelSwitch",
        "TeammateIdle", "TaskCreated", "TaskCompleted", "Elicitation", "ElicitationResult", "ConfigChange",
        "InstructionsLoaded", "WorktreeCreate", "WorktreeRemove", "CwdChanged", "FileChanged", "DirectoryAdded",
        "MessageDisplay", "PreSkillShellCommand"]

    static let knownFields: Set<String> = [
        "session_id", "transcript_path", "cwd", "permission_mode", "hook_event_name", "prompt", "tool_name",
        "tool_input", "tool_use_id", "tool_response", "message", "notification_type", "source", "reason",
        "stop_hook_active", "last_assistant_message", "timeoutSeconds", "permission_suggestions",
        "error", "mcp_server_name",
        // read by nothing, but expected: the debug log names only fields nobody knows
        "prompt_id", "effort", "model", "background_tasks", "session_crons", "duration_ms", "agent_id", "agent_type",
        "is_interrupt", "trigger", "custom_instructions", "title", "agent_transcript_path", "mcp_server", "tool_kind",
        "mcp_skill", "session_title", "seconds_since_last_response", "context_tokens", "prompt_cache_likely_expired",
        "estimated_cache_write_usd", "error_details", "compact_summary", "teammate_name", "team_name", "task_id",
        "task_subject", "task_description", "mode", "url", "elicitation_id", "requested_schema", "action", "content",
        "tool_calls", "expansion_type", "command_name", "command_args", "command_source", "invoked_by"]

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
        case "PreToolUse": try h.preToolUse(&ids)
        case "PostToolUse": try h.postToolUse(engine)
        case "PostToolUseFailure": try h.toolFailed(engine)
        case "PermissionRequest": try h.permissionRequest(&ids)
        case "Stop":
            _ = try AgentFields.optionalBool(o, "stop_hook_active", source)
            h.add(.taskCompleted(summary: try AgentFields.optionalString(o, "last_assistant_message", source)))
        case "SessionEnd": try h.sessionEnd(engine)
        case "Notification": try h.notification()
        case "SessionStart":
            _ = try AgentFields.optionalString(o, "source", source)
            h.m.ignore("SessionStart: the session shows once a prompt is submitted")
        case "StopFailure":
            // The turn ended on an API error (rate limit, overload, ...).
            h.add(.taskFailed(error: try AgentFields.optionalString(o, "error", source)))
        case "Elicitation":
            // An MCP server asks the person for input in the terminal.
            h.add(.needsInput(NeedsInput(reason: .agentNeedsInput, message: try AgentFields.optionalString(o, "message", source))))
        case "SubagentStart", "SubagentStop":
            h.m.ignore("\(event): the main agent is still working")
        case "TaskCreated", "TaskCompleted":
            h.m.ignore("\(event): the plan changes with TaskCreate/TaskUpdate's PostToolUse")
        default:
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
            for k in turnOver(engine.session(sid)) { add(k) }
            add(.taskStarted(prompt: prompt))
        }

        mutating func preToolUse(_ ids: inout AgentIdSource) throws {
            let t = try tool()
            if ClaudeTaskTools.names.contains(t.name) {
                return m.ignore("PreToolUse \(t.name): the plan changes when the tool has run (PostToolUse)")
            }
            ToolCalls.map(name: t.name, input: t.input, toolUseId: t.id, sessionId: sid, projectPath: cwd, ids: &ids, into: &m)
        }

        mutating func postToolUse(_ engine: Engine) throws {
            let t = try tool()
            let session = engine.session(sid)
            if t.name == "AskUserQuestion", let qid = t.id,
               session?.pendingQuestions.contains(where: { $0.questionId == qid }) == true {
                let answers = ToolCalls.answers(from: o["tool_response"])
                if answers.isEmpty { m.ignore("AskUserQuestion result carries no answers we can read") }
                else { m.events.append(.questionAnswer(questionId: qid, answers: answers, deviceId: "terminal")) }
            } else if ClaudeTaskTools.names.contains(t.name) {
                if let plan = ClaudeTaskTools.plan(after: t.name, input: t.input, response: o["tool_response"],
                                                   current: session?.todos ?? [], into: &m) {
                    add(.progress(todos: plan))
                } else if m.ignored.isEmpty {
                    m.ignore("PostToolUse \(t.name): the plan is unchanged")
                }
            } else if !cancelStaleApprovals(session, t) {
                m.ignore("PostToolUse: the operation line already shows \(t.name)")
            }
        }

        /// The tool ran (or failed to), so its permission was decided in
        /// Claude Code's own prompt: the phone must stop asking.
        mutating func cancelStaleApprovals(_ session: Session?, _ t: (name: String, input: [String: JSON], id: String?)) -> Bool {
            let stale = session?.pendingApprovals.filter { isHookRequest($0, for: t.name, t.input) } ?? []
            for a in stale { add(.approvalCancelled(requestId: a.requestId)) }
            return !stale.isEmpty
        }

        mutating func toolFailed(_ engine: Engine) throws {
            let t = try tool()
            _ = try AgentFields.optionalString(o, "error", source)
            if !cancelStaleApprovals(engine.session(sid), t) {
                m.ignore("PostToolUseFailure: Claude reads the error and goes on")
            }
        }

        /// Claude Code waits for the person in its terminal: "needs you".
        mutating func notification() throws {
            let message = try AgentFields.optionalString(o, "message", source)
            let type = try AgentFields.optionalString(o, "notification_type", source)
            let reason: NeedsInput.Reason
            switch type {
            case "permission_prompt", "worker_permission_prompt": reason = .permissionPrompt
            case "agent_needs_input", "elicitation_dialog", "elicitation_url_dialog": reason = .agentNeedsInput
            case "idle_prompt": reason = .idlePrompt
            default: return m.ignore("Notification \(type ?? "without a type"): informational")
            }
            add(.needsInput(NeedsInput(reason: reason, message: message)))
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
            if engine.session(sid)?.isActive == true {
                add(.taskCompleted(summary: "Session ended (\(reason))"))
            } else {
                m.ignore("SessionEnd: the session is not running")
            }
        }
    }

    /// An approval this adapter made (a hook's PermissionRequest).
    static func isHookApproval(_ a: ApprovalRequest) -> Bool { a.requestId.hasPrefix("hook-") }

    /// A pending approval this adapter made for the same tool call.
    static func isHookRequest(_ a: ApprovalRequest, for name: String, _ input: [String: JSON]) -> Bool {
        isHookApproval(a) && a.tool == ToolCalls.toolUse(name: name, input: input)
    }

    /// The session's turn is over: the hook approvals still waiting in it are cancelled.
    static func turnOver(_ session: Session?) -> [AgentEvent.Kind] {
        (session?.pendingApprovals ?? []).filter(isHookApproval).map { .approvalCancelled(requestId: $0.requestId) }
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
