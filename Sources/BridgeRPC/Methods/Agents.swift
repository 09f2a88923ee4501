import BridgeCore
import BridgeEngine

/// Real agent inputs (see rpc-spec/parts/agents.json): each method takes the
/// agent's raw object as params and feeds the engine the native events it
/// means (Adapters/). `agent.hook` answers a PermissionRequest only when the
/// approval is resolved: decided by a person (`approval.respond` from any
/// client), timed out by the engine, or cancelled (task ended, agent said so,
/// or the hook's connection closed first: Claude Code killed the hook because
/// the person answered in the terminal).
extension MethodTable {
    func registerAgents(_ env: ServerEnvironment) throws {
        let host = env.engine
        let state = AgentAdapterState()
        // The requests a hook waits on, kept durably (key: request id) so a
        // restart knows which restored approvals have nobody listening.
        let waitingNS = "hook.waiting"
        weak let durable = env.options.ephemeral ? nil : env.store
        func remember(_ rid: String, _ sid: String) {
            do { try durable?.put(.json(["sessionId": .string(sid)]), namespace: waitingNS, key: rid, nowMs: host.now) } catch {
                Log.warn("hook request \(rid) not recorded: \(error)")
            }
        }
        func forget(_ rid: String) {
            do { _ = try durable?.delete(namespace: waitingNS, key: rid) } catch { Log.warn("hook request \(rid) not forgotten: \(error)") }
        }
        host.observers.append { [state] effect in
            guard case let .approvalResolved(rid, _, decision, by) = effect else { return }
            if state.resolve(rid, decision, by: by) { forget(rid) }
        }
        env.onConnectionClosed.append { [state, unowned host] connection in
            // Nobody is left to act on these decisions: stop asking the phone.
            for rid in state.abandon(connection: connection) {
                guard let a = host.engine.pendingApprovals.first(where: { $0.requestId == rid }) else { continue }
                Log.debug("agent.hook connection \(connection) closed while \(rid) was pending: cancelled")
                host.apply(.agent(AgentEvent(sessionId: a.sessionId, kind: .approvalCancelled(requestId: rid))))
            }
        }
        env.afterRecovery.append { [unowned host] in
            // A hook's PermissionRequest restored from an earlier run: its hook
            // went with that process's connection (Claude Code asks in the
            // terminal instead), so no answer could reach it.
            let earlier = (try? durable?.entries(namespace: waitingNS)) ?? []
            for (rid, _) in earlier {
                forget(rid)
                guard let a = host.engine.pendingApprovals.first(where: { $0.requestId == rid }) else { continue }
                Log.info("restored \(rid): its hook is gone with the previous run; cancelled")
                host.apply(.agent(AgentEvent(sessionId: a.sessionId, kind: .approvalCancelled(requestId: rid))))
            }
        }

        onAsync("agent.hook") { p, ctx, reply in
            var m = try ClaudeHookAdapter.map(p.raw, engine: host.engine, ids: &state.ids)
            // Our own field beside Claude Code's snake_case ones: how long the
            // hook will wait. The approval expires a little before, so the
            // person never decides something nobody is listening for.
            if let t: Double = try p.optional("timeoutSeconds") {
                guard Settings.approvalTimeoutRange.contains(t) else {
                    throw RPCError.invalidParams("invalid params: 'timeoutSeconds' must be within 1...86400",
                                                 data: ["param": "timeoutSeconds", "expected": "number 1...86400",
                                                        "got": .double(t)])
                }
                let effective = min(t, host.engine.settings.approvalTimeoutSeconds)
                m.events = m.events.map {
                    guard case .agent(var a) = $0, case let .approvalRequest(rid, tool, _) = a.kind else { return $0 }
                    a.kind = .approvalRequest(requestId: rid, tool: tool, timeoutSeconds: effective)
                    return .agent(a)
                }
            }
            let applied = AgentMethods.apply(m, host)
            guard let rid = m.approvalRequestId else {
                // A PermissionRequest we do not take (AskUserQuestion): the
                // hook still gets a decision, "none", and prints nothing.
                return reply(.success(m.kind == "PermissionRequest" ? AgentMethods.decided(applied, nil, nil, by: nil, host) : applied))
            }
            guard host.engine.pendingApprovals.contains(where: { $0.requestId == rid }) else {
                // Nothing to wait for (cannot normally happen: ids are fresh).
                return reply(.success(AgentMethods.decided(applied, rid, nil, by: nil, host)))
            }
            if let sid = m.sessionId { remember(rid, sid) }
            state.wait(rid, connection: ctx.connectionID) { resolution, by in
                reply(.success(AgentMethods.decided(applied, rid, resolution, by: by, host)))
            }
        }

        on("agent.streamJson") { p, _ in
            AgentMethods.apply(try StreamJSONAdapter.map(p.raw, engine: host.engine, ids: &state.ids), host)
        }

        on("agent.claudecodeui") { p, _ in
            AgentMethods.apply(try ClaudeCodeUIAdapter.map(p.raw, engine: host.engine, ids: &state.ids), host)
        }
    }
}

/// Per-server adapter state: fresh request ids, the hook requests waiting
/// for their approval to resolve, and the connection each one waits on.
/// Loop thread only.
final class AgentAdapterState {
    var ids = AgentIdSource()
    private var waiting: [String: [(ApprovalResolution, String?) -> Void]] = [:]
    private var byConnection: [Int: Set<String>] = [:]
    private var connectionOf: [String: Int] = [:]

    func wait(_ rid: String, connection: Int, _ k: @escaping (ApprovalResolution, String?) -> Void) {
        waiting[rid, default: []].append(k)
        connectionOf[rid] = connection
        byConnection[connection, default: []].insert(rid)
    }

    /// Answers the hooks waiting on `rid`; whether there were any.
    @discardableResult
    func resolve(_ rid: String, _ r: ApprovalResolution, by: String?) -> Bool {
        forget(rid)
        guard let ks = waiting.removeValue(forKey: rid) else { return false }
        for k in ks { k(r, by) }
        return true
    }

    /// The requests a closed connection was waiting for (its waiters stay
    /// until the approval resolves; their replies then go nowhere).
    func abandon(connection: Int) -> [String] {
        guard let rids = byConnection.removeValue(forKey: connection) else { return [] }
        for rid in rids { connectionOf[rid] = nil }
        return rids.sorted()
    }

    private func forget(_ rid: String) {
        guard let c = connectionOf.removeValue(forKey: rid) else { return }
        byConnection[c]?.remove(rid)
        if byConnection[c]?.isEmpty == true { byConnection[c] = nil }
    }
}

enum AgentMethods {
    /// Feeds the mapped events to the engine; the method's result.
    static func apply(_ m: AgentMapping, _ host: EngineHost) -> JSON {
        var problems = m.ignored
        for e in m.events {
            let t = host.apply(e)
            if case .question(let r) = t.reply, r.status != .accepted {
                // An answer given at the terminal that does not fit the question
                // (or a question already answered from the app): nothing to undo.
                let why = "answer for question \(r.questionId): \(r.status.rawValue)\(r.problem.map { " (\($0))" } ?? "")"
                Log.debug("agent \(m.kind): \(why)")
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

    /// A PermissionRequest's final answer: the decision and the exact JSON
    /// the hook prints for Claude Code (null: print nothing).
    static func decided(_ applied: JSON, _ rid: String?, _ r: ApprovalResolution?, by: String?, _ host: EngineHost) -> JSON {
        guard case .object(var o) = applied else { return applied }
        let decision: String
        switch r {
        case .allow?: decision = "allow"
        case .deny?: decision = "deny"
        case .timedOut?: decision = "timeout"
        case .cancelled?: decision = "cancelled"
        case nil: decision = "none"
        }
        if let rid { o["requestId"] = .string(rid) }
        o["decision"] = .string(decision)
        o["by"] = by.json
        o["hookOutput"] = ClaudeHookAdapter.decisionOutput(r, by: by) ?? .null
        if case .string(let sid)? = o["sessionId"] { o["sessionStatus"] = host.engine.session(sid).map { .string($0.status.rawValue) } ?? .null }
        return .object(o)
    }
}
