import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// A Claude Code session as its hooks reported it: where it runs and
/// whether its process ended. Kept durably, so a message to a session that
/// ended before a restart still resumes it.
struct HookSession: Equatable {
    var cwd: String?
    var ended: Bool
    var seenAt: Int64

    var json: JSON { ["cwd": cwd.map(JSON.string) ?? .null, "ended": .bool(ended), "seenAt": .int(seenAt)] }

    init(cwd: String?, ended: Bool, seenAt: Int64) {
        self.cwd = cwd
        self.ended = ended
        self.seenAt = seenAt
    }

    init?(_ j: JSON) {
        guard let ended = j["ended"]?.boolValue, let at = j["seenAt"]?.intValue else { return nil }
        self.init(cwd: j["cwd"]?.stringValue, ended: ended, seenAt: at)
    }
}

/// Resuming an ended session with a device's message: `CMD --resume=ID -p --
/// TEXT` in its directory (`serve --resume-command`, default `claude`). Its
/// first hook input (SessionStart resume, or the prompt) reads the message;
/// a process that exits before that fails it (`outbox.undeliverable`); a
/// command that cannot start leaves it for the next Stop.
extension AgentInbox {
    static let namespace = "agent.sessions"
    /// Sessions nothing was heard from this long are forgotten (as the engine forgets them).
    static let retentionMs: Int64 = 7 * 24 * 3_600_000

    func loadSessions() {
        let cutoff = delivery.nowMs - Self.retentionMs
        for (key, value) in (try? store.entries(namespace: Self.namespace)) ?? [] {
            if case .json(let j) = value, let s = HookSession(j), s.seenAt >= cutoff { sessions[key] = s }
            else { _ = try? store.delete(namespace: Self.namespace, key: key) }
        }
    }

    /// Records the session (durably when what matters changed). SessionEnd
    /// ends it, unless the process lives on (`/clear`, a switch to another
    /// session): resuming that one beside the person would surprise them.
    func track(_ sessionId: String, event: String, input: JSON?) {
        let reason = input?["reason"]?.stringValue
        let ended = event == "SessionEnd" && reason != "clear" && reason != "resume"
        let now = delivery.nowMs
        var s = sessions[sessionId] ?? HookSession(cwd: nil, ended: false, seenAt: now)
        let before = sessions[sessionId]
        if let cwd = input?["cwd"]?.stringValue { s.cwd = cwd }
        s.ended = ended
        // seenAt is refreshed in the store once a day, not per event.
        if durable, before == nil || before?.cwd != s.cwd || before?.ended != s.ended || now - s.seenAt > 86_400_000 {
            s.seenAt = now
            do { try store.put(.json(s.json), namespace: Self.namespace, key: sessionId, nowMs: now) } catch {
                log.warn("session \(sessionId) not recorded: \(error)")
            }
        }
        sessions[sessionId] = s
        if ended { resume(sessionId) }
    }

    /// A message was queued (`message.send`): a session that has ended is resumed with it.
    func queued(sessionId: String) {
        if sessions[sessionId]?.ended == true { resume(sessionId) }
    }

    private func resume(_ sessionId: String) {
        guard let command = resumeCommand, unread[sessionId] == nil else { return }
        store.afterCommit { [weak self] _ in self?.startResume(sessionId, command: command) }
    }

    private func startResume(_ sessionId: String, command: String) {
        guard let s = sessions[sessionId], s.ended, unread[sessionId] == nil, let m = takeHead(sessionId) else { return }
        unread[sessionId] = .resume(m.id)
        if let cwd = s.cwd, access(cwd, F_OK) != 0 {
            return resumeFailed(m.id, sessionId: sessionId, why: "the session's directory \(cwd) is gone")
        }
        // Inflight is committed before the process can act on it.
        store.afterCommit { [weak self] _ in self?.launch(m, sessionId: sessionId, command: command, cwd: s.cwd) }
    }

    private func launch(_ m: (id: Int64, text: String), sessionId: String, command: String, cwd: String?) {
        do {
            // `--resume=`: an id that looks like an option stays the id;
            // `--`: so does a message.
            try loop.spawn([command, "--resume=\(sessionId)", "-p", "--", m.text], cwd: cwd) { [weak self] status, signal in
                self?.resumeExited(m.id, sessionId: sessionId, status: status, signal: signal)
            }
            log.info("session \(sessionId) resumed with message \(m.id) (\(command) --resume)")
        } catch {
            unread[sessionId] = nil
            log.warn("session \(sessionId) not resumed: \(command) could not be started (\(error)); message \(m.id) waits for its next Stop")
            requeue(m.id, why: "\(command): \(error)")
        }
    }

    private func resumeExited(_ id: Int64, sessionId: String, status: Int64, signal: Int32) {
        guard unread[sessionId] == .resume(id) else { return } // read: the session's hooks showed up
        resumeFailed(id, sessionId: sessionId, why: signal != 0 ? "resume killed by signal \(signal)" : "resume exited with status \(status)")
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
