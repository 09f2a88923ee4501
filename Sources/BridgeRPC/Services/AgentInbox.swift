import BridgeCore

/// Messages sent from a device (`message.send`) into a Claude Code session
/// its hooks report (outbox kind `agent.message`, which the client delivery
/// leaves alone). Claude Code reads nothing while it works, so a message goes
/// in at the session's next Stop: the Stop hook answers `{"decision": "block",
/// "reason": ...TEXT}` and Claude continues with it. A session whose process
/// has ended (SessionEnd) is resumed instead (AgentResume.swift).
///
/// Outbox semantics: one message per session at a time, in order; handing it
/// out makes it inflight (attempt+1, committed before the hook's reply
/// leaves); the session's next hook input that shows Claude went on with it
/// acks it (delivered). A message whose Stop reply was lost goes again at the
/// next Stop or resume; one out of attempts, or expired, is failed and
/// clients get `outbox.undeliverable`. Inflight survives a restart: the first
/// hook input after it finds the message still handed out.
final class AgentInbox {
    static let kind = Store.agentMessageKind
    let store: Store
    let delivery: OutboxDelivery
    let loop: EventLoop
    let log: Logger
    /// The command that resumes a session (`serve --resume-command`); nil: never resume.
    let resumeCommand: String?
    /// How a message went to a session: in a Stop hook's reply, or by resuming it.
    enum Handout: Equatable { case stop(Int64), resume(Int64) }
    /// Handed out and not yet acknowledged, by session.
    var unread: [String: Handout] = [:]
    /// Sessions Claude Code's hooks reported (AgentResume.swift), kept in
    /// the store when it is `durable` (not with --ephemeral: nothing to restore).
    var sessions: [String: HookSession] = [:]
    let durable: Bool
    /// Sessions whose handouts were looked up in the store since the start.
    private var recovered: Set<String> = []

    init(store: Store, delivery: OutboxDelivery, loop: EventLoop, log: Logger, resumeCommand: String?, durable: Bool) {
        self.store = store
        self.delivery = delivery
        self.loop = loop
        self.log = log
        self.resumeCommand = resumeCommand
        self.durable = durable
        if durable { loadSessions() }
    }

    /// Whether a message for `sessionId` goes in through its hooks.
    func owns(_ sessionId: String) -> Bool { sessions[sessionId] != nil }

    /// Every hook input of a session: acknowledges what it proves was read,
    /// and keeps track of whether its process ended.
    func seen(sessionId: String, event: String, input: JSON?) {
        recoverHandout(sessionId)
        if let h = unread[sessionId] {
            if Self.reads(h, event: event, input: input) {
                acknowledge(h.id, sessionId: sessionId, event: event)
            } else if event == "SessionEnd", case .stop(let id) = h {
                // It stopped without the message: it goes again when resumed.
                unread[sessionId] = nil
                requeue(id, why: "the session ended before Claude Code read it")
            }
        }
        track(sessionId, event: event, input: input)
    }

    /// Whether a hook input shows Claude Code read the message. After a
    /// Stop's block it works on (tools, a Stop with stop_hook_active); a new
    /// prompt, an idle notice or the end mean the block never arrived. A
    /// resumed session reads its message as its prompt.
    static func reads(_ h: Handout, event: String, input: JSON?) -> Bool {
        switch (h, event) {
        case (.resume, "SessionStart"), (.resume, "UserPromptSubmit"): return true
        case (_, "PreToolUse"), (_, "PostToolUse"), (_, "PostToolUseFailure"), (_, "PostToolBatch"), (_, "PermissionRequest"):
            return true
        case (_, "Stop"), (_, "SubagentStop"): return input?["stop_hook_active"]?.boolValue == true
        default: return false
        }
    }

    /// At a Stop: the session's next message, now inflight, or nil. A Stop
    /// without stop_hook_active after a handout means its reply was lost
    /// (the hook died): the same message goes again.
    func takeForStop(_ sessionId: String, input: JSON?) -> (id: Int64, text: String)? {
        if case .stop(let id)? = unread[sessionId], input?["stop_hook_active"]?.boolValue != true {
            unread[sessionId] = nil
            requeue(id, why: "the Stop hook's reply never reached Claude Code")
        }
        guard unread[sessionId] == nil, let m = takeHead(sessionId) else { return nil }
        unread[sessionId] = .stop(m.id)
        return m
    }

    /// The session's next message, now inflight; expired ones and ones out
    /// of attempts are failed on the way, and clients told.
    func takeHead(_ sessionId: String) -> (id: Int64, text: String)? {
        let now = delivery.nowMs
        do {
            var again = true
            while again {
                again = false
                for m in try store.takeSessionHead(sessionId, nowMs: now, ackDeadlineMs: now + delivery.ackTimeoutMs) {
                    if m.status == .inflight, m.attempts <= m.maxAttempts { return (m.id, m.payload["text"]?.stringValue ?? "") }
                    if m.status == .inflight {
                        try store.fail(id: m.id, error: "not read after \(m.maxAttempts) attempts", retryAtMs: nil, nowMs: now)
                        again = true // the next one may go
                    }
                    log.info("message \(m.id) for session \(sessionId) not delivered: \(m.status == .expired ? "expired" : "out of attempts")")
                    delivery.notifyUndeliverable(m.id)
                }
            }
        } catch {
            log.error("messages for session \(sessionId) not read: \(error)")
        }
        return nil
    }

    private func acknowledge(_ id: Int64, sessionId: String, event: String) {
        unread[sessionId] = nil
        do {
            try store.ack(id: id, nowMs: delivery.nowMs)
            log.info("message \(id) read by session \(sessionId) (\(event))")
        } catch {
            log.warn("message \(id) not acknowledged: \(error)")
        }
    }

    /// A failed attempt: queued again, due now.
    func requeue(_ id: Int64, why: String) {
        do { try store.fail(id: id, error: why, retryAtMs: delivery.nowMs, nowMs: delivery.nowMs) } catch {
            log.error("message \(id) not requeued: \(error)")
        }
    }

    /// After a restart: a message still inflight was handed out before it.
    private func recoverHandout(_ sessionId: String) {
        guard unread[sessionId] == nil, recovered.insert(sessionId).inserted, owns(sessionId) else { return }
        let inflight = (try? store.messages(sessionId: sessionId, statuses: [.inflight], limit: 1)) ?? []
        if let m = inflight.first, m.kind == Self.kind { unread[sessionId] = .stop(m.id) }
    }
}

extension AgentInbox.Handout {
    var id: Int64 {
        switch self { case .stop(let id), .resume(let id): return id }
    }
}
