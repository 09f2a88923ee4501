import BridgeCore
import BridgeEngine

/// Real agent inputs (see rpc-spec/parts/agents.json): each method takes the
/// agent's raw object as params and feeds the engine the native events it
/// means (Adapters/). `agent.hook` answers a PermissionRequest only when the
/// approval is resolved (`HookWaiters`).
extension MethodTable {
    func registerAgents(_ env: ServerEnvironment) {
        let host = env.engine
        let log = env.log
        // Fresh request ids for approvals that arrive without one.
        final class IdBox { var ids = AgentIdSource() }
        let box = IdBox()

        onAsync("agent.hook") { p, ctx, reply in
            var m = try ClaudeHookAdapter.map(p.raw, engine: host.engine, ids: &box.ids)
            try AgentMethods.limitWait(&m, p, settings: host.engine.settings)
            if let inbox = env.inbox, let sid = m.sessionId {
                inbox.seen(sessionId: sid, event: m.kind, input: p.raw)
                if m.kind == "Stop", let message = inbox.takeForStop(sid, input: p.raw) {
                    return reply(.success(try AgentMethods.continueWith(message, &m, host, log)))
                }
            }
            if m.approvalRequestId != nil, let why = env.noAnswerer(for: ctx) {
                return reply(.success(try AgentMethods.withoutApproval(&m, why, host, log)))
            }
            let applied = try AgentMethods.apply(m, host, log)
            if let qid = AgentMethods.pendingQuestion(m, p.raw, host) {
                return AgentMethods.waitForAnswer(qid, applied, p.raw, env, ctx, reply)
            }
            AgentMethods.waitForDecision(m, applied, env, ctx, reply)
        }

        on("agent.streamJson") { p, _ in
            try AgentMethods.apply(try StreamJSONAdapter.map(p.raw, engine: host.engine, ids: &box.ids), host, log)
        }

        on("agent.claudecodeui") { p, _ in
            try AgentMethods.apply(try ClaudeCodeUIAdapter.map(p.raw, engine: host.engine, ids: &box.ids), host, log)
        }
    }
}

enum AgentMethods {
    /// A PermissionRequest nobody can answer: the approval is never made
    /// (no phone later sees one nobody waits for); Claude Code's own prompt decides.
    static func withoutApproval(_ m: inout AgentMapping, _ why: String, _ host: EngineHost, _ log: Logger) throws -> JSON {
        m.events.removeAll {
            if case .agent(let a) = $0, case .approvalRequest = a.kind { return true }
            return false
        }
        m.approvalRequestId = nil
        m.ignore(why)
        return decided(try apply(m, host, log), nil, nil, by: nil, host, noAnswerer: true)
    }

    /// A Stop while a device's message waits: Claude Code is told to go on
    /// with it (Stop decision control `block` with the text as the reason),
    /// so the turn does not complete.
    static func continueWith(_ message: (id: Int64, text: String), _ m: inout AgentMapping, _ host: EngineHost,
                             _ log: Logger) throws -> JSON {
        // Not completed, but its turn's open permission requests are over (as at a Stop).
        let sid = m.sessionId ?? ""
        m.events = ClaudeHookAdapter.turnOver(host.engine.session(sid)).map { .agent(AgentEvent(sessionId: sid, kind: $0)) }
        m.ignore("Stop: message \(message.id) from a device continues the session")
        guard case .object(var o) = try apply(m, host, log) else { return .null }
        o["decision"] = "continue"
        o["messageId"] = .int(message.id)
        o["hookOutput"] = ["decision": "block", "reason": .string(stopReason(message.text))]
        return .object(o)
    }

    /// Claude Code hands a Stop hook's reason to the model as hook output,
    /// which it treats as data unless the hook itself asks something: so the
    /// hook says what the text is and asks Claude to go on with it.
    static func stopReason(_ text: String) -> String {
        "The user sent this message from CodingBridge (their phone or browser) while you were working. "
            + "Continue with it as their next prompt:\n\n" + text
    }

    /// The question id of an AskUserQuestion PreToolUse whose question is pending.
    static func pendingQuestion(_ m: AgentMapping, _ raw: JSON?, _ host: EngineHost) -> String? {
        guard m.kind == "PreToolUse", raw?["tool_name"]?.stringValue == "AskUserQuestion",
              let qid = raw?["tool_use_id"]?.stringValue, let sid = m.sessionId,
              host.engine.session(sid)?.pendingQuestions.contains(where: { $0.questionId == qid }) == true else { return nil }
        return qid
    }

    /// The answer from a client goes back as the tool's input (Claude Code
    /// then skips its own dialog); with nobody to answer, Claude Code asks
    /// in the terminal at once.
    static func waitForAnswer(_ qid: String, _ applied: JSON, _ raw: JSON?, _ env: ServerEnvironment, _ ctx: RPCContext,
                              _ reply: @escaping RPCReply) {
        if let why = env.noAnswerer(for: ctx) {
            env.log.debug("agent.hook AskUserQuestion \(qid): \(why)")
            return reply(.success(answered(applied, nil, by: nil, input: [:], noAnswerer: true)))
        }
        let input = raw?["tool_input"]?.objectValue ?? [:]
        env.waiters.waitForAnswer(qid, connection: ctx.connectionID) { answers, by in
            reply(.success(answered(applied, answers, by: by, input: input)))
        }
    }

    /// A PermissionRequest waits until its approval resolves; anything else
    /// is answered at once.
    static func waitForDecision(_ m: AgentMapping, _ applied: JSON, _ env: ServerEnvironment, _ ctx: RPCContext,
                                _ reply: @escaping RPCReply) {
        let host = env.engine
        guard let rid = m.approvalRequestId else {
            // A PermissionRequest we do not take (AskUserQuestion): the
            // hook still gets a decision, "none", and prints nothing.
            return reply(.success(m.kind == "PermissionRequest" ? decided(applied, nil, nil, by: nil, host) : applied))
        }
        guard let pending = host.engine.pendingApprovals.first(where: { $0.requestId == rid }) else {
            // Nothing to wait for (cannot normally happen: ids are fresh).
            return reply(.success(decided(applied, rid, nil, by: nil, host)))
        }
        // "Always allow" hands back what the approval kept of the request's suggestions.
        let suggestions = pending.permissionSuggestions
        env.waiters.wait(rid, session: m.sessionId, connection: ctx.connectionID, now: host.now) { resolution, by, options in
            reply(.success(decided(applied, rid, resolution, by: by, host, options: options, permissionSuggestions: suggestions)))
        }
    }

    /// Our own field beside Claude Code's snake_case ones: how long the hook
    /// will wait. The approval expires a little before, so the person never
    /// decides something nobody is listening for. The contract keeps it
    /// within 1...86400 s.
    static func limitWait(_ m: inout AgentMapping, _ p: Params, settings: Settings) throws {
        guard let t: Double = try p.optional("timeoutSeconds") else { return }
        let effective = min(t, settings.approvalTimeoutSeconds)
        m.events = m.events.map {
            guard case .agent(var a) = $0, case let .approvalRequest(rid, tool, _, suggestions) = a.kind else { return $0 }
            a.kind = .approvalRequest(requestId: rid, tool: tool, timeoutSeconds: effective, permissionSuggestions: suggestions)
            return .agent(a)
        }
    }

    /// Feeds the mapped events to the engine; the method's result.
    static func apply(_ m: AgentMapping, _ host: EngineHost, _ log: Logger) throws -> JSON {
        try host.refuseReusedIds(m.events)
        if !m.unusedFields.isEmpty { log.debug("agent \(m.kind): fields not used: \(m.unusedFields.joined(separator: ", "))") }
        for reason in m.ignored { log.debug("agent \(m.kind)\(m.sessionId.map { " session \($0)" } ?? ""): ignored: \(reason)") }
        var problems = m.ignored
        for e in m.events {
            let t = host.apply(e)
            if case .question(let r) = t.reply, r.status != .accepted {
                // An answer given at the terminal that does not fit the question
                // (or a question already answered from the app): nothing to undo.
                let why = "answer for question \(r.questionId): \(r.status.rawValue)\(r.problem.map { " (\($0))" } ?? "")"
                log.debug("agent \(m.kind): \(why)")
                problems.append(why)
            }
        }
        let status = m.sessionId.flatMap { host.engine.session($0)?.status.rawValue }
        return ["sessionId": m.sessionId.json, "kind": .string(m.kind),
                "status": .string(m.events.isEmpty ? "ignored" : "applied"),
                "events": .array(m.eventNames.map { .string($0) }),
                "ignored": .array(problems.map { .string($0) }),
                "sessionStatus": status.json]
    }

    /// An AskUserQuestion's PreToolUse once answered on a client: allow with
    /// `updatedInput` = the tool input plus `answers` (question text -> the
    /// chosen labels, joined by ", "), so Claude Code skips its dialog.
    /// `answers` nil: nobody could answer; nothing printed.
    static func answered(_ applied: JSON, _ answers: [String: [String]]?, by: String?, input: [String: JSON],
                         noAnswerer: Bool = false) -> JSON {
        guard case .object(var o) = applied else { return applied }
        o["decision"] = .string(noAnswerer ? "noAnswerer" : "answered")
        o["by"] = by.json
        guard let answers else { o["hookOutput"] = .null; return .object(o) }
        var byText: [String: JSON] = [:]
        for q in input["questions"]?.arrayValue ?? [] {
            guard let text = q["question"]?.stringValue else { continue }
            if let a = answers[text] ?? q["header"]?.stringValue.flatMap({ answers[$0] }) {
                byText[text] = .string(a.joined(separator: ", "))
            }
        }
        var updated = input
        updated["answers"] = .object(byText)
        o["hookOutput"] = ["hookSpecificOutput": ["hookEventName": "PreToolUse", "permissionDecision": "allow",
                                                  "updatedInput": .object(updated)]]
        return .object(o)
    }

    /// A PermissionRequest's final answer: the decision and the exact JSON
    /// the hook prints for Claude Code (null: print nothing).
    static func decided(_ applied: JSON, _ rid: String?, _ r: ApprovalResolution?, by: String?, _ host: EngineHost,
                        options: DecisionOptions = .none, permissionSuggestions: [JSON] = [], noAnswerer: Bool = false) -> JSON {
        guard case .object(var o) = applied else { return applied }
        let decision: String
        switch r {
        case nil where noAnswerer: decision = "noAnswerer"
        case .allow?: decision = "allow"
        case .deny?: decision = "deny"
        case .timedOut?: decision = "timeout"
        case .cancelled?: decision = "cancelled"
        case nil: decision = "none"
        }
        if let rid { o["requestId"] = .string(rid) }
        o["decision"] = .string(decision)
        o["by"] = by.json
        o["hookOutput"] = ClaudeHookAdapter.decisionOutput(r, by: by, options: options,
                                                           permissionSuggestions: permissionSuggestions) ?? .null
        if case .string(let sid)? = o["sessionId"] { o["sessionStatus"] = host.engine.session(sid).map { .string($0.status.rawValue) } ?? .null }
        return .object(o)
    }
}
