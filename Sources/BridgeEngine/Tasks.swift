/// Agent events: task start, tool use, TodoWrite progress, completion, failure,
/// hand-off (DESIGN "agent.event" native types). Approvals and questions are in
/// their own files.
extension Engine {
    mutating func handleAgent(_ e: AgentEvent, now: Millis, into effects: inout [Effect]) {
        withSession(e.sessionId, now: now) { s in
            if let n = e.projectName, !n.isEmpty { s.projectName = n }
            if let p = e.projectPath, !p.isEmpty { s.projectPath = p }
            s.lastActivityAt = now
        }
        switch e.kind {
        case .needsInput, .approvalCancelled, .approvalTimeout: break
        default: inputGiven(e.sessionId, now: now, into: &effects)
        }
        switch e.kind {
        case .taskStarted:
            startTask(e.sessionId, now: now)
            effects.append(.sessionChanged(sessionId: e.sessionId))
            // Table row "Task starts": background -> Live Activity starts (it
            // moves here from any other session: this one is now the most recent).
            startActivity(e.sessionId, now: now, into: &effects)

        case .toolUse(let tool):
            toolUsed(e.sessionId, tool, now: now, into: &effects)

        case .progress(let todos):
            progressed(e.sessionId, todos, now: now, into: &effects)

        case let .approvalRequest(rid, tool, timeout, suggestions):
            requestApproval(e, requestId: rid, tool: tool, timeoutSeconds: timeout, permissionSuggestions: suggestions,
                            now: now, into: &effects)

        case .approvalCancelled(let rid):
            guard let sid = state.approvalIndex[rid] else { return }
            resolveApproval(rid, sessionId: sid, as: .cancelled, by: nil, now: now, into: &effects)
            refreshActivity(sid, now: now, into: &effects)

        case .approvalTimeout(let rid):
            timeOutApproval(rid, now: now, into: &effects)

        case let .question(qid, questions):
            askQuestion(e, questionId: qid, questions: questions, now: now, into: &effects)

        case .taskCompleted(let summary):
            finishTask(e, failed: false, detail: summary, now: now, into: &effects)

        case .taskFailed(let error):
            finishTask(e, failed: true, detail: error, now: now, into: &effects)

        case .sessionHandoff(let to):
            handoff(e, to: to, now: now, into: &effects)

        case .needsInput(let n):
            needInput(e, n, now: now, into: &effects)
        }
    }

    /// A tool call: the operation line changes; no notification per tool
    /// (OVERVIEW "Non-Goals"), at most a silent Live Activity update.
    mutating func toolUsed(_ sid: String, _ tool: ToolUse, now: Millis, into effects: inout [Effect]) {
        let op = strings[OperationText.key(for: tool)]
        // session.changed when what a person reads changes: the state, the
        // message, or the kind of operation ("Running tests" -> "Editing
        // files"); a burst of calls of one kind stays one line, not a flood,
        // and front ends in the foreground need no polling.
        let (changed, idle) = withSession(sid, now: now) { s -> (Bool, Bool) in
            let changed = s.run != .running || s.message != nil || s.operation != op
            s.operation = op
            s.message = nil
            return (changed, s.run != .running)
        }
        if idle { startTask(sid, now: now, keepOperation: true) }
        if changed { effects.append(.sessionChanged(sessionId: sid)) }
        if state.activity == nil { startActivity(sid, now: now, into: &effects) }
        refreshActivity(sid, now: now, into: &effects)
    }

    /// The most plan items a session keeps for updates by id.
    public static let maxKeptTodos = 256

    /// TodoWrite or the Task tools: "3 of 7 tasks" and the current item.
    mutating func progressed(_ sid: String, _ todos: [Todo], now: Millis, into effects: inout [Effect]) {
        let p = TodoProgress(todos: todos)
        let (changed, idle) = withSession(sid, now: now) { s -> (Bool, Bool) in
            // The plan is kept for Task tool updates; a runaway list is cut
            // (its counts stay whole in `progress`).
            defer { s.progress = p; s.todos = Array(todos.prefix(Engine.maxKeptTodos)) }
            return (s.progress != p || s.run != .running, s.run != .running)
        }
        if idle { startTask(sid, now: now, keepOperation: true) }
        if changed { effects.append(.sessionChanged(sessionId: sid)) }
        if state.activity == nil { startActivity(sid, now: now, into: &effects) }
        refreshActivity(sid, now: now, into: &effects)
    }

    mutating func startTask(_ sid: String, now: Millis, keepOperation: Bool = false) {
        let reminder = now + Engine.longTaskThreshold
        let starting = strings["operation.starting"]
        withSession(sid, now: now) { s in
            s.run = .running
            s.startedAt = now
            if !keepOperation { s.operation = starting; s.progress = nil }
            s.message = nil
            s.longRunning = false
            s.nextReminderAt = reminder
            s.recomputeStatus()
        }
        state.deadlines.push(reminder, .longTaskReminder(sessionId: sid))
    }

    /// Task complete / Error occurred rows of the notification table.
    mutating func finishTask(_ e: AgentEvent, failed: Bool, detail: String?, now: Millis, into effects: inout [Effect]) {
        let sid = e.sessionId
        // Open requests are moot once the task ended.
        for r in state.sessions[sid]?.pendingApprovals ?? [] {
            resolveApproval(r.requestId, sessionId: sid, as: .cancelled, by: nil, now: now, into: &effects)
        }
        dropQuestions(sid, now: now, into: &effects)
        let genericKey = failed ? "notification.error.body.generic" : "notification.complete.body.generic"
        let body = Privacy.lockScreenText(detail, generic: strings[genericKey], settings: state.settings, services: services)
        let wasBackground = state.app.isBackground
        let session = withSession(sid, now: now) { s -> Session in
            s.run = failed ? .failed : .completed
            // Nothing is running any more; the summary line says how it ended.
            s.operation = nil
            s.message = body
            s.nextReminderAt = nil
            s.recomputeStatus()
            return s
        }
        effects.append(.sessionChanged(sessionId: sid))
        if wasBackground { state.metrics.count(.backgroundTaskCompleted) }
        let title = strings[failed ? "notification.error.title" : "notification.complete.title"]
        if wasBackground {
            let n = makeNotification(id: nextId(failed ? "failed" : "complete", sid), title: title, body: body,
                                     category: failed ? .taskFailed : .taskComplete,
                                     event: failed ? .errorOccurred : .taskComplete, sound: true,
                                     actions: failed ? openAppAction() : [], session: session, link: .session(id: sid))
            push(n, sentAt: e.sentAt, now: now, into: &effects)
        } else if failed {
            // "Error occurred" in foreground: in-app alert. "Task complete": nothing.
            effects.append(.showBanner(Banner(id: nextId("failed", sid), style: .alert, title: title,
                                              body: detail.map { Privacy.inAppText($0, services: services) } ?? body,
                                              sessionId: sid, deepLink: DeepLink.session(id: sid).url, actions: [])))
        }
        if state.activity?.sessionId == sid {
            endActivity(now: now, into: &effects)
            activityFollowUp(now: now, into: &effects)
        }
    }

    /// EDGE-CASES "Session Handoff / Continuity": the agent says the session
    /// moved (`session_handoff`); it stops running here.
    mutating func handoff(_ e: AgentEvent, to: String?, now: Millis, into effects: inout [Effect]) {
        let sid = e.sessionId
        let text = strings["activity.handoff"]
        withSession(sid, now: now) { s in
            s.activeDevice = to ?? "another device"
            s.message = text
            s.run = .idle
            s.nextReminderAt = nil
            s.recomputeStatus()
        }
        effects.append(.sessionChanged(sessionId: sid))
        releaseActivity(sid, to: to, from: nil, sentAt: e.sentAt, now: now, into: &effects)
    }

    /// EDGE-CASES "Session Handoff", Detection: each session remembers the
    /// device that last interacted with it (a message, a decision, an answer).
    /// When the person acts in the app of another device than the one showing
    /// the session's Live Activity, the session goes on there: the activity
    /// ends with "Session continued on another device" (the agent keeps
    /// working; a later significant event may start one again). A decision
    /// taken on the notification or the activity itself comes from the device
    /// that shows them: never a hand-off. Returns whether the session's
    /// device changed.
    @discardableResult
    mutating func deviceInteracted(_ sid: String, device: String?, source: DecisionSource = .app, now: Millis,
                                   into effects: inout [Effect]) -> Bool {
        guard let device, state.sessions[sid] != nil else { return false }
        let changed = state.sessions[sid]!.activeDevice != device
        state.sessions[sid]!.activeDevice = device
        guard let a = state.activity, a.sessionId == sid else { return changed }
        guard let shownOn = a.device else {
            state.activity!.device = device // not known yet: the first device to act shows it
            refreshActivity(sid, now: now, force: true, into: &effects) // clients learn whose it is
            return changed
        }
        if source == .app, shownOn != device {
            releaseActivity(sid, to: device, from: shownOn, sentAt: nil, now: now, into: &effects)
        }
        return changed
    }

    /// Ends the session's Live Activity with the hand-off line and, when the
    /// person is away, posts the subtle "Session Handed Off" notification
    /// (a device change without an activity to release stays silent).
    private mutating func releaseActivity(_ sid: String, to: String?, from: String?, sentAt: Millis?, now: Millis,
                                          into effects: inout [Effect]) {
        let text = strings["activity.handoff"]
        let hadActivity = state.activity?.sessionId == sid
        if hadActivity { endActivity(now: now, message: text, into: &effects) }
        // "Show subtle notification": passive, silent, only when away.
        if state.app.isBackground, let session = state.sessions[sid] {
            var extra: [String: String] = [:]
            if let to { extra["handedOffTo"] = to }
            if let from { extra["handedOffFrom"] = from }
            let n = makeNotification(id: nextId("handoff", sid), title: strings["notification.handoff.title"],
                                     body: strings["notification.handoff.body"], category: .sessionHandoff, event: nil,
                                     level: .passive, sound: false, actions: [], session: session, link: .session(id: sid),
                                     extra: extra)
            push(n, sentAt: sentAt, now: now, into: &effects)
        }
        // The activity goes to another busy session, never straight back to this one.
        if hadActivity || state.activity == nil { activityFollowUp(excluding: sid, now: now, into: &effects) }
    }
}
