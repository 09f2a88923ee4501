/// OVERVIEW "Task States": what a person needs to know at a glance.
public enum SessionStatus: String, Sendable, CaseIterable {
    case idle, processing, awaitingApproval, awaitingAnswer, awaitingInput, completed, error
}

/// One plan item: a TodoWrite todo (`content`, `status`, `activeForm` as
/// Claude Code sends them) or a Task tool's task (`subject` as content, and
/// the `id` TaskUpdate names it by).
public struct Todo: Equatable, Sendable {
    public enum State: String, Sendable, CaseIterable { case pending, in_progress, completed }
    public var content: String
    public var status: State
    public var activeForm: String?
    public var id: String?
    public init(content: String, status: State, activeForm: String? = nil, id: String? = nil) {
        self.content = content
        self.status = status
        self.activeForm = activeForm
        self.id = id
    }
}

/// TodoWrite-based progress: "3 of 7 tasks" and the current activeForm.
public struct TodoProgress: Equatable, Sendable {
    public var completed: Int
    public var total: Int
    /// activeForm of the in-progress item ("Running unit tests"), else its content.
    public var current: String?

    public init(completed: Int, total: Int, current: String?) {
        self.completed = completed
        self.total = total
        self.current = current
    }

    public init?(todos: [Todo]) {
        guard !todos.isEmpty else { return nil }
        total = todos.count
        completed = todos.lazy.filter { $0.status == .completed }.count
        let active = todos.first { $0.status == .in_progress }
        current = active.map { $0.activeForm ?? $0.content }
    }
}

/// A resolved approval/question, kept so the person can see later what
/// happened while they were away (PRD Flow 3: "they see timeout in history").
public struct HistoryEntry: Equatable, Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case approved, denied, timedOut, cancelled, answered, questionCancelled
    }
    public var at: Millis
    public var kind: Kind
    public var id: String
    public var toolName: String?
    public var by: String?
}

/// State of one agent session (DESIGN "The engine").
public struct Session: Equatable, Sendable {
    /// Where the run is, independent of what it waits for; `status` combines
    /// both. `waiting`: the agent waits for the person outside any request we
    /// hold (its own terminal prompt, its next prompt). Raw values are stored.
    enum Run: UInt8, Sendable { case idle, running, completed, failed, waiting }

    public let id: String
    public var projectName: String?
    public var projectPath: String?
    public internal(set) var status: SessionStatus = .idle
    /// Operation text ("Running tests"), never raw command text.
    public internal(set) var operation: String?
    public internal(set) var progress: TodoProgress?
    /// The plan behind `progress`, so a Task tool's update can be applied to it.
    public internal(set) var todos: [Todo] = []
    public internal(set) var startedAt: Millis?
    public internal(set) var lastActivityAt: Millis
    public internal(set) var pendingApprovals: [ApprovalRequest] = []
    public internal(set) var pendingQuestions: [QuestionRequest] = []
    /// The device that last acted on this session (approval, hand-off).
    public internal(set) var activeDevice: String?
    /// Last detail line shown with the status (task summary, error, "Approval
    /// timed out - Claude continued"). Already privacy-filtered.
    public internal(set) var message: String?
    public internal(set) var history: [HistoryEntry] = []

    var run: Run = .idle
    /// Long-running task (> 1 h): next reminder due, Live Activity no longer used.
    var nextReminderAt: Millis?
    var longRunning = false
    /// The "needs you" notification posted for the current wait, cleared when it ends.
    var inputNotification: String?
    /// Claude Code showed its own permission prompt while our request was
    /// open: if the request ends unanswered, that prompt still waits.
    var terminalPrompt: NeedsInput?

    static let historyLimit = 20

    init(id: String, now: Millis) {
        self.id = id
        lastActivityAt = now
    }

    /// Status follows from the run and what is pending: an open approval
    /// outranks a question, which outranks plain processing.
    mutating func recomputeStatus() {
        if !pendingApprovals.isEmpty { status = .awaitingApproval }
        else if !pendingQuestions.isEmpty { status = .awaitingAnswer }
        else {
            switch run {
            case .idle: status = .idle
            case .running: status = .processing
            case .completed: status = .completed
            case .failed: status = .error
            case .waiting: status = .awaitingInput
            }
        }
    }

    mutating func record(_ entry: HistoryEntry) {
        if history.count >= Session.historyLimit { history.removeFirst(history.count - Session.historyLimit + 1) }
        history.append(entry)
    }

    /// Still needs the person or still working: candidates for the Live Activity.
    public var isActive: Bool { run == .running || run == .waiting || !pendingApprovals.isEmpty || !pendingQuestions.isEmpty }

    public func elapsedSeconds(at now: Millis) -> Int? {
        startedAt.map { Int(max(0, now - $0) / 1000) }
    }
}
