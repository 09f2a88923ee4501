/// The Live Activity: one, for the most recently active session (EDGE-CASES
/// "iOS Live Activity Limits"). Policy:
/// - starts when the app goes to background while a session is processing, or
///   when a session starts / needs the person while the app is in background;
/// - updates silently on progress (only when what it shows changed);
/// - moves to another session only on a significant event there (task start,
///   approval, question), so two busy sessions do not make it flicker;
/// - ends on completion/failure, on return to foreground when idle, on
///   hand-off, when disabled (settings or permission: notifications instead),
///   and after 1 hour (long tasks get periodic reminders instead).
public struct LiveActivity: Equatable, Sendable {
    public let sessionId: String
    public let startedAt: Millis
    /// The device showing it: the app's device when it started, else the
    /// session's device, else the first device to act on the session.
    public internal(set) var device: String?
    /// What the activity shows now (as last sent).
    public internal(set) var content: ActivityContent
}

/// EDGE-CASES "Live Activities Disabled": `checkLiveActivityAvailability`.
public enum LiveActivityStatus: String, Sendable, CaseIterable {
    case available, disabledByUser, disabledInApp, notSupported
}

/// ActivityKit ContentState plus the rendered strings a front end can show as-is.
public struct ActivityContent: Equatable, Sendable {
    public struct Approval: Equatable, Sendable {
        public var requestId: String
        public var toolName: String
        public var summary: String
        public var expiresAt: Millis
    }
    public struct Rendered: Equatable, Sendable {
        /// Dynamic Island compact: project name (truncated), status indicator, elapsed.
        public var compact: String
        /// Dynamic Island expanded: full name, operation, elapsed, status.
        public var expanded: String
        /// Lock screen: name and path, operation, progress or elapsed, actions.
        public var lockScreen: String
    }
    public var sessionId: String
    public var projectName: String
    public var projectPath: String?
    public var status: SessionStatus
    public var statusText: String
    public var operation: String?
    public var progress: TodoProgress?
    /// "3 of 7 tasks"
    public var progressText: String?
    public var startedAt: Millis?
    public var elapsedSeconds: Int
    public var approval: Approval?
    /// "Approval timed out - Claude continued", "Session continued on another device"
    public var message: String?
    public var rendered: Rendered
    /// The device showing the activity (`LiveActivity.device`), so each
    /// client knows whether a hand-off's end is its own; nil while unknown.
    public var device: String? = nil

    /// Equal apart from the clock: an update that only moves elapsed time is
    /// not sent (the activity's timer view counts by itself).
    func sameState(as o: ActivityContent) -> Bool {
        sessionId == o.sessionId && projectName == o.projectName && projectPath == o.projectPath
            && status == o.status && statusText == o.statusText && operation == o.operation
            && progress == o.progress && startedAt == o.startedAt && approval == o.approval && message == o.message
            && device == o.device
    }
}

extension Engine {
    public var liveActivityStatus: LiveActivityStatus {
        if !state.app.liveActivitiesPermitted { return .disabledByUser }
        if !state.settings.enableLiveActivities { return .disabledInApp }
        return .available
    }

    static let compactNameLimit = 12
    public static let longTaskThreshold: Millis = 3_600_000

    /// The content for a session at `now`, with rendered strings, as shown on `device`.
    public func activityContent(for s: Session, device: String?, now: Millis) -> ActivityContent {
        let name = displayName(s)
        let statusKey: String
        let indicatorKey: String
        switch s.status {
        case .idle: statusKey = "activity.idle"; indicatorKey = "activity.compact.idle"
        case .processing: statusKey = "activity.processing"; indicatorKey = "activity.compact.working"
        case .awaitingApproval: statusKey = "activity.awaiting_approval"; indicatorKey = "activity.compact.waiting"
        case .awaitingAnswer: statusKey = "activity.awaiting_answer"; indicatorKey = "activity.compact.waiting"
        case .awaitingInput: statusKey = "activity.awaiting_input"; indicatorKey = "activity.compact.waiting"
        case .completed: statusKey = "activity.completed"; indicatorKey = "activity.compact.done"
        case .error: statusKey = "activity.error"; indicatorKey = "activity.compact.error"
        }
        let statusText = strings[statusKey]
        // Newest approval (EDGE-CASES "Show most recent in Live Activity").
        let approval = s.pendingApprovals.last.map {
            ActivityContent.Approval(requestId: $0.requestId, toolName: $0.tool.name,
                                     summary: Privacy.lockScreenText($0.tool.detail,
                                                                     generic: strings["notification.approval.body.generic"],
                                                                     settings: state.settings, services: services),
                                     expiresAt: $0.expiresAt)
        }
        let gate = self.gate
        let path = gate.path(s.projectPath), progress = gate.progress(s.progress)
        let progressText = progress.flatMap { p in
            p.total > 0 ? strings.format("activity.progress", String(p.completed), String(p.total)) : nil
        }
        let elapsed = s.elapsedSeconds(at: now) ?? 0
        let elapsedStr = elapsedText(elapsed)

        // Dynamic Island compact.
        let compact = "\(Privacy.truncate(name, to: Engine.compactNameLimit)) · \(strings[indicatorKey]) · \(elapsedStr)"
        // Dynamic Island expanded.
        let focus: String? = approval.map { "\($0.toolName): \($0.summary)" } ?? s.message ?? s.operation
        var expanded = ["\(name) — \(statusText)"]
        if let focus { expanded.append(focus) }
        expanded.append([progressText, elapsedStr].compactMap { $0 }.joined(separator: " · "))
        // Lock screen.
        var lock = [path.map { "\(name)  \($0)" } ?? name]
        lock.append([statusText, approval == nil ? s.operation : nil].compactMap { $0 }.joined(separator: " · "))
        if let p = progress, p.total > 0 {
            var line = strings.format("activity.progress.complete", String(p.completed), String(p.total))
            if let cur = p.current { line += " · \(cur)" }
            lock.append(line)
        }
        lock.append(strings.format("activity.elapsed", elapsedStr))
        if let m = s.message { lock.append(m) }
        if let a = approval {
            lock.append("\(a.toolName): \(a.summary)")
            lock.append(strings["activity.approval.actions"])
        }
        return ActivityContent(
            sessionId: s.id, projectName: name, projectPath: path, status: s.status, statusText: statusText,
            operation: s.operation, progress: progress, progressText: progressText, startedAt: s.startedAt,
            elapsedSeconds: elapsed, approval: approval, message: s.message,
            rendered: .init(compact: compact, expanded: expanded.joined(separator: "\n"),
                            lockScreen: lock.joined(separator: "\n")),
            device: device)
    }

    /// Current activity content, re-rendered at `now` (for `activity.get`),
    /// through the same gate as the effects.
    public func currentActivity(now: Millis) -> ActivityContent? {
        guard let a = state.activity, let s = state.sessions[a.sessionId] else { return nil }
        return gate.activity(activityContent(for: s, device: a.device, now: now))
    }

    /// Sends an update if the activity belongs to `sessionId` and what it shows changed.
    mutating func refreshActivity(_ sessionId: String, now: Millis, force: Bool = false, into effects: inout [Effect]) {
        guard state.activity?.sessionId == sessionId, let a = state.activity, let s = state.sessions[sessionId] else { return }
        // Cheap check first: rendering strings for every tool call of a busy
        // session would dominate the engine's cost. (Settings changes force a
        // full comparison: privacy and locale change the text, not the state.)
        let o = a.content, gate = self.gate
        if !force, o.status == s.status, o.operation == s.operation, o.progress == gate.progress(s.progress),
           o.message == s.message, o.startedAt == s.startedAt, o.projectPath == gate.path(s.projectPath),
           o.approval?.requestId == s.pendingApprovals.last?.requestId, o.projectName == displayName(s) { return }
        let c = activityContent(for: s, device: a.device, now: now)
        guard !c.sameState(as: a.content) else { return }
        state.activity!.content = c
        effects.append(.updateActivity(c))
    }

    /// Starts the activity for `sessionId` if the policy allows; ends another
    /// session's activity first (only one at a time).
    mutating func startActivity(_ sessionId: String, now: Millis, into effects: inout [Effect]) {
        guard state.app.isBackground, liveActivityStatus == .available,
              let s = state.sessions[sessionId], s.isActive, !s.longRunning else { return }
        if let a = state.activity {
            if a.sessionId == sessionId { refreshActivity(sessionId, now: now, into: &effects); return }
            endActivity(now: now, into: &effects)
        }
        let c = activityContent(for: s, device: state.app.device ?? s.activeDevice, now: now)
        state.activity = LiveActivity(sessionId: sessionId, startedAt: now, device: c.device, content: c)
        state.metrics.count(.liveActivityStarted)
        effects.append(.startActivity(c))
    }

    /// Ends the activity with its final content; `message` overrides the line shown.
    mutating func endActivity(now: Millis, message: String? = nil, into effects: inout [Effect]) {
        guard let a = state.activity else { return }
        var c = state.sessions[a.sessionId].map { activityContent(for: $0, device: a.device, now: now) } ?? a.content
        if let message {
            c.message = message
            c.rendered.lockScreen += "\n" + message
            c.rendered.expanded += "\n" + message
        }
        state.activity = nil
        state.metrics.count(.liveActivityEnded)
        effects.append(.endActivity(c))
    }

    /// The most recently active session that still works or waits, if any.
    func mostRecentActiveSession(excluding: String? = nil) -> String? {
        var best: Session?
        for s in state.sessions.values where s.isActive && !s.longRunning && s.id != excluding {
            if best == nil || s.lastActivityAt > best!.lastActivityAt
                || (s.lastActivityAt == best!.lastActivityAt && s.id < best!.id) { best = s }
        }
        return best?.id
    }

    /// After the activity's session finished: hand the activity to another busy session.
    mutating func activityFollowUp(excluding: String? = nil, now: Millis, into effects: inout [Effect]) {
        guard state.activity == nil, let next = mostRecentActiveSession(excluding: excluding) else { return }
        startActivity(next, now: now, into: &effects)
    }
}
