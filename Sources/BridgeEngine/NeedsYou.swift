/// "Needs you": the agent waits for the person with nothing we can answer
/// for it (Claude Code's own terminal prompt, an idle prompt, the next prompt
/// after a permission was refused in the terminal). The status says so
/// (`awaitingInput`), the Live Activity shows it, and away from the terminal
/// one notification asks the person to look (never for `nextPrompt`: the
/// person just answered at the terminal).
extension Engine {
    mutating func needInput(_ e: AgentEvent, _ n: NeedsInput, now: Millis, into effects: inout [Effect]) {
        let sid = e.sessionId
        guard let s = state.sessions[sid] else { return }
        if !s.pendingApprovals.isEmpty || !s.pendingQuestions.isEmpty {
            // Our request already asks the person (with its notification); the
            // terminal prompt shown beside it is remembered in case ours ends unanswered.
            if n.reason == .permissionPrompt || n.reason == .agentNeedsInput { state.sessions[sid]!.terminalPrompt = n }
            return
        }
        // An idle reminder after the task ended: its completion said it all.
        if n.reason == .idlePrompt, s.run != .running, s.run != .waiting { return }
        wait(sid, n, sentAt: e.sentAt, now: now, into: &effects)
    }

    /// The session waits for the person: status, Live Activity, and (away) one notification per wait.
    mutating func wait(_ sid: String, _ n: NeedsInput, sentAt: Millis?, now: Millis, into effects: inout [Effect]) {
        let text = strings[Engine.statusKey(n.reason)]
        let (session, already) = withSession(sid, now: now) { s -> (Session, Bool) in
            let already = s.run == .waiting && s.message == text
            s.run = .waiting
            s.message = text
            s.terminalPrompt = nil
            s.recomputeStatus()
            return (s, already)
        }
        guard !already else { return }
        effects.append(.sessionChanged(sessionId: sid))
        if state.activity == nil { startActivity(sid, now: now, into: &effects) }
        refreshActivity(sid, now: now, into: &effects)
        guard n.reason != .nextPrompt, session.inputNotification == nil else { return }
        let body = Privacy.lockScreenText(n.message, generic: strings["notification.input.body.generic"],
                                          settings: state.settings, services: services)
        let id = nextId("input", sid)
        let note = makeNotification(id: id, title: strings["notification.input.title"], body: body, category: .needsInput,
                                    event: n.reason == .idlePrompt ? nil : .questionAsked, level: n.reason == .idlePrompt ? .active : nil,
                                    sound: true, actions: openAppAction(), session: session, link: .session(id: sid))
        if push(note, sentAt: sentAt, now: now, into: &effects) { state.sessions[sid]!.inputNotification = id }
    }

    /// The agent moved on (a tool ran, a prompt came, a request opened, the
    /// turn ended): the wait is over and its notification goes.
    mutating func inputGiven(_ sid: String, now: Millis, into effects: inout [Effect]) {
        guard let s = state.sessions[sid] else { return }
        if let id = s.inputNotification { effects.append(.clearNotifications(ids: [id])) }
        state.sessions[sid]!.inputNotification = nil
        state.sessions[sid]!.terminalPrompt = nil
        guard s.run == .waiting else { return }
        withSession(sid, now: now) { s in
            s.run = .running
            s.message = nil
            s.recomputeStatus()
        }
        effects.append(.sessionChanged(sessionId: sid))
    }

    /// Our request ended unanswered (timed out) while Claude Code's own
    /// prompt for it was on screen: that prompt still waits for the person.
    mutating func terminalPromptRemains(_ sid: String, now: Millis, into effects: inout [Effect]) {
        guard let s = state.sessions[sid], let n = s.terminalPrompt, s.pendingApprovals.isEmpty, s.pendingQuestions.isEmpty
        else { return }
        wait(sid, n, sentAt: nil, now: now, into: &effects)
    }

    static func statusKey(_ r: NeedsInput.Reason) -> String {
        switch r {
        case .permissionPrompt: return "status.input.permission"
        case .agentNeedsInput: return "status.input.agent"
        case .idlePrompt: return "status.input.idle"
        case .nextPrompt: return "status.input.next_prompt"
        }
    }
}
