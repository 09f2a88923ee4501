import BridgeCore
import BridgeEngine

/// Hook requests (`agent.hook` PermissionRequest) waiting for their approval
/// to resolve: decided by a person on any client, timed out by the engine,
/// or cancelled. A hook whose connection closes first (Claude Code cancelled
/// it: the person refused in the terminal) cancels its approval, and the
/// session waits for its next prompt; so does an http hook whose HTTP client
/// goes away. Waiters are keyed by connection
/// id, and each http hook request takes a key of its own that no connection
/// has (`newRequestKey`), so it is cancelled alone. The requests a
/// hook waits on are also kept durably, so a restart knows which restored
/// approvals have nobody listening.
final class HookWaiters {
    static let namespace = "hook.waiting"
    typealias Waiter = (ApprovalResolution, String?, DecisionOptions) -> Void

    /// nil in memory (--ephemeral): nothing to restore.
    weak var store: Store?
    private let log: Logger
    private var waiting: [String: [Waiter]] = [:]
    private var byConnection: [Int: Set<String>] = [:]
    private var connectionOf: [String: Int] = [:]
    /// Connection ids count up from 1; http hook requests count down from -1.
    private var lastRequestKey = 0

    init(log: Logger) { self.log = log }

    func newRequestKey() -> Int {
        lastRequestKey -= 1
        return lastRequestKey
    }

    func wait(_ rid: String, session: String?, connection: Int, now: Int64, _ k: @escaping Waiter) {
        if let session, let store {
            do { try store.put(.json(["sessionId": .string(session)]), namespace: Self.namespace, key: rid, nowMs: now) } catch {
                log.warn("hook request \(rid) not recorded: \(error)")
            }
        }
        waiting[rid, default: []].append(k)
        connectionOf[rid] = connection
        byConnection[connection, default: []].insert(rid)
    }

    /// PreToolUse hooks for AskUserQuestion waiting for the question's
    /// answer, by question id. A hook that goes away first takes its waiter
    /// with it: the question stays for the terminal (its PostToolUse answers it).
    typealias QuestionWaiter = ([String: [String]], String?) -> Void
    private var questions: [String: [(connection: Int, k: QuestionWaiter)]] = [:]
    private var questionsByConnection: [Int: Set<String>] = [:]

    func waitForAnswer(_ qid: String, connection: Int, _ k: @escaping QuestionWaiter) {
        questions[qid, default: []].append((connection, k))
        questionsByConnection[connection, default: []].insert(qid)
    }

    private func dropQuestionWaiters(of connection: Int) {
        for qid in questionsByConnection.removeValue(forKey: connection) ?? [] {
            questions[qid]?.removeAll { $0.connection == connection }
            if questions[qid]?.isEmpty == true { questions[qid] = nil }
        }
    }

    /// Pipeline step 4: answers the hooks waiting on what was resolved.
    func resolve(_ effects: [Effect]) {
        for case let .questionAnswered(qid, _, answers, by) in effects {
            for w in questions.removeValue(forKey: qid) ?? [] {
                questionsByConnection[w.connection]?.remove(qid)
                if questionsByConnection[w.connection]?.isEmpty == true { questionsByConnection[w.connection] = nil }
                w.k(answers, by)
            }
        }
        for case let .approvalResolved(rid, _, decision, by, options) in effects {
            detach(rid)
            guard let ks = waiting.removeValue(forKey: rid) else { continue }
            forgetDurably(rid)
            for k in ks { k(decision, by, options) }
        }
    }

    /// A connection closed (or an http hook request was given up): nobody is
    /// left to act on its decisions, so the phone stops asking (approval
    /// waiters stay until the approval resolves, their replies then going
    /// nowhere; question waiters go at once).
    /// `agentLeft`: the agent side went away (not our own backstop giving up).
    func connectionClosed(_ connection: Int, host: EngineHost, agentLeft: Bool = true) {
        dropQuestionWaiters(of: connection)
        guard let rids = byConnection.removeValue(forKey: connection) else { return }
        for rid in rids.sorted() {
            connectionOf[rid] = nil
            guard let sid = cancel(rid, host), agentLeft else { continue }
            log.debug("agent.hook connection \(connection) closed while \(rid) was pending: cancelled")
            // Claude Code cancels a waiting hook when the person refuses in its
            // terminal prompt: the turn stops and it waits for the next prompt.
            host.apply(.agent(AgentEvent(sessionId: sid, kind: .needsInput(NeedsInput(reason: .nextPrompt)))))
        }
    }

    /// Startup: a hook's PermissionRequest restored from an earlier run has
    /// no hook any more (it went with that process's connection; Claude Code
    /// asks in the terminal instead), so it is cancelled.
    func cancelRestored(host: EngineHost) {
        let earlier = (try? store?.entries(namespace: Self.namespace)) ?? []
        for (rid, _) in earlier {
            forgetDurably(rid)
            if cancel(rid, host) != nil { log.info("restored \(rid): its hook is gone with the previous run; cancelled") }
        }
    }

    /// Cancels `rid` if it is still pending; its session if it was.
    private func cancel(_ rid: String, _ host: EngineHost) -> String? {
        guard let a = host.engine.pendingApprovals.first(where: { $0.requestId == rid }) else { return nil }
        host.apply(.agent(AgentEvent(sessionId: a.sessionId, kind: .approvalCancelled(requestId: rid))))
        return a.sessionId
    }

    private func detach(_ rid: String) {
        guard let c = connectionOf.removeValue(forKey: rid) else { return }
        byConnection[c]?.remove(rid)
        if byConnection[c]?.isEmpty == true { byConnection[c] = nil }
    }

    private func forgetDurably(_ rid: String) {
        do { _ = try store?.delete(namespace: Self.namespace, key: rid) } catch {
            log.warn("hook request \(rid) not forgotten: \(error)")
        }
    }
}
