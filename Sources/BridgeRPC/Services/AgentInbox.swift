import BridgeCore

/// Messages sent from a device (`message.send`, outbox kind "message") into
/// a running Claude Code session. Claude Code reads nothing while it works,
/// so a message goes in at the session's next Stop: the Stop hook answers
/// `{"decision": "block", "reason": TEXT}` and Claude continues with TEXT.
/// A session whose process has ended (SessionEnd) is resumed instead with
/// `claude --resume ID -p -- TEXT` in its directory.
///
/// Outbox semantics: one message per session at a time, in order; handing
/// it out makes it inflight (attempt+1, committed before the hook's reply
/// leaves); the session's next hook input that shows Claude went on with it
/// acks it (delivered). A message whose Stop reply was lost is handed out
/// again at the next Stop; a resume whose process exits
/// before the session shows up again fails the message (outbox.undeliverable);
/// a resume command that cannot start leaves it for the next Stop.
final class AgentInbox {
    static let kind = "message"
    let store: Store
    let delivery: OutboxDelivery
    let loop: EventLoop
    let log: Logger
    /// The command that resumes a session (`serve --resume-command`); nil: never resume.
    let resumeCommand: String?
    /// How a message went to a session: in a Stop hook's reply, or by resuming it.
    enum Handout: Equatable { case stop(Int64), resume(Int64) }
    /// Handed out and not yet acknowledged, by session.
    private var unread: [String: Handout] = [:]
    /// Sessions whose Claude Code process ended (SessionEnd) and was not seen since.
    private var ended: [String: String?] = [:]

    init(store: Store, delivery: OutboxDelivery, loop: EventLoop, log: Logger, resumeCommand: String?) {
        self.store = store
        self.delivery = delivery
        self.loop = loop
        self.log = log
        self.resumeCommand = resumeCommand
    }

    /// Every hook input of a session: acknowledges what it proves was read.
    func seen(sessionId: String, event: String, input: JSON?) {
        if let h = unread[sessionId], Self.reads(h, event: event, input: input) {
            unread[sessionId] = nil
            let id = h.id
            do {
                try store.ack(id: id, nowMs: delivery.nowMs)
                log.info("message \(id) read by session \(sessionId) (\(event))")
            } catch {
                log.warn("message \(id) not acknowledged: \(error)")
            }
            delivery.schedulePump()
        }
        if event == "SessionEnd" { ended[sessionId] = .some(input?["cwd"]?.stringValue) } else { ended[sessionId] = nil }
    }

    /// Whether a hook input shows Claude Code read the message. After a
    /// Stop's block it goes on working (tools, a Stop with stop_hook_active);
    /// a new prompt, an idle notice or the end mean the block never arrived.
    /// A resumed session reads its message as its prompt: any input of it.
    static func reads(_ h: Handout, event: String, input: JSON?) -> Bool {
        switch h {
        case .resume: return event != "SessionEnd"
        case .stop:
            switch event {
            case "UserPromptSubmit", "SessionStart", "SessionEnd", "Notification": return false
            case "Stop", "SubagentStop": return input?["stop_hook_active"]?.boolValue == true
            default: return true
            }
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

    /// A message was queued (`message.send`): a session that has ended is resumed with it.
    func queued(sessionId: String) {
        if ended[sessionId] != nil { resume(sessionId) }
    }

    /// After a SessionEnd: a message that came while the session was idle resumes it.
    func sessionEnded(_ sessionId: String) { resume(sessionId) }

    private func takeHead(_ sessionId: String) -> (id: Int64, text: String)? {
        let now = delivery.nowMs
        do {
            for m in try store.takeSessionHead(sessionId, kind: Self.kind, nowMs: now, ackDeadlineMs: now + delivery.ackTimeoutMs) {
                guard m.status == .inflight else {
                    log.info("message \(m.id) for session \(sessionId) expired before the session could read it")
                    continue
                }
                return (m.id, m.payload["text"]?.stringValue ?? "")
            }
        } catch {
            log.error("messages for session \(sessionId) not read: \(error)")
        }
        return nil
    }

    private func resume(_ sessionId: String) {
        guard let command = resumeCommand, let cwdEntry = ended[sessionId], unread[sessionId] == nil else { return }
        store.afterCommit { [weak self] _ in self?.startResume(sessionId, command: command, cwd: cwdEntry) }
    }

    private func startResume(_ sessionId: String, command: String, cwd: String?) {
        guard ended[sessionId] != nil, unread[sessionId] == nil, let m = takeHead(sessionId) else { return }
        unread[sessionId] = .resume(m.id)
        ended[sessionId] = nil
        // Inflight is committed before the process can act on it.
        store.afterCommit { [weak self] _ in self?.launch(m, sessionId: sessionId, command: command, cwd: cwd) }
    }

    private func launch(_ m: (id: Int64, text: String), sessionId: String, command: String, cwd: String?) {
        do {
            // `--`: a message that looks like an option ("--dangerously-...")
            // must stay the prompt.
            try loop.spawn([command, "--resume", sessionId, "-p", "--", m.text], cwd: cwd) { [weak self] status, signal in
                self?.resumeExited(m.id, sessionId: sessionId, status: status, signal: signal)
            }
            log.info("session \(sessionId) resumed with message \(m.id) (\(command) --resume)")
        } catch {
            // No way to resume here (not installed, not on PATH): the message
            // waits for the session's next Stop instead of failing.
            unread[sessionId] = nil
            log.warn("session \(sessionId) not resumed: \(command) could not be started (\(error)); message \(m.id) waits for its next Stop")
            requeue(m.id, why: "\(command): \(error)")
        }
    }

    private func resumeExited(_ id: Int64, sessionId: String, status: Int64, signal: Int32) {
        guard unread[sessionId] == .resume(id) else { return } // read: the session's hooks showed up
        resumeFailed(id, sessionId: sessionId, why: signal != 0 ? "resume killed by signal \(signal)" : "resume exited with status \(status)")
    }

    /// A failed attempt: queued again, due now.
    private func requeue(_ id: Int64, why: String) {
        do { try store.fail(id: id, error: why, retryAtMs: delivery.nowMs, nowMs: delivery.nowMs) } catch {
            log.error("message \(id) not requeued: \(error)")
        }
    }

    private func resumeFailed(_ id: Int64, sessionId: String, why: String) {
        unread[sessionId] = nil
        log.warn("message \(id) for session \(sessionId) not delivered: \(why)")
        do { try store.fail(id: id, error: why, retryAtMs: nil, nowMs: delivery.nowMs) } catch {
            log.error("message \(id) not marked failed: \(error)")
        }
        delivery.notifyUndeliverable(id)
    }
}

extension AgentInbox.Handout {
    var id: Int64 {
        switch self { case .stop(let id), .resume(let id): return id }
    }
}
