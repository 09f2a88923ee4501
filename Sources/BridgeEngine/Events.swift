import BridgeCore

/// A tool call as the agent reports it; the fields are Claude Code's
/// `tool_input` names reduced to what the engine shows or classifies.
public struct ToolUse: Equatable, Sendable {
    public var name: String
    public var command: String?
    public var filePath: String?
    public var pattern: String?
    public var url: String?
    public var description: String?
    public init(name: String, command: String? = nil, filePath: String? = nil, pattern: String? = nil,
                url: String? = nil, description: String? = nil) {
        self.name = name
        self.command = command
        self.filePath = filePath
        self.pattern = pattern
        self.url = url
        self.description = description
    }

    /// The detail a person approves ("npm test", "src/app.ts"). Raw: it goes
    /// through the privacy filter before any lock-screen surface.
    public var detail: String {
        command ?? filePath ?? url ?? pattern ?? description ?? name
    }
}

/// AskUserQuestion: questions with header, options and multiSelect.
public struct Question: Equatable, Sendable {
    public struct Option: Equatable, Sendable {
        public var label: String
        public var description: String?
        public init(label: String, description: String? = nil) {
            self.label = label
            self.description = description
        }
    }
    public var question: String
    public var header: String?
    public var options: [Option]
    public var multiSelect: Bool
    public init(question: String, header: String? = nil, options: [Option] = [], multiSelect: Bool = false) {
        self.question = question
        self.header = header
        self.options = options
        self.multiSelect = multiSelect
    }
}

/// Why an agent waits for the person with nothing we can answer for it
/// (Claude Code's Notification hook types, and the prompt after a permission
/// was refused in its terminal). `message`: the agent's own words, raw.
public struct NeedsInput: Equatable, Sendable {
    public enum Reason: String, Sendable, CaseIterable {
        /// Its own permission prompt is on screen.
        case permissionPrompt = "permission_prompt"
        /// It asks something in the terminal (auto mode, an MCP elicitation).
        case agentNeedsInput = "agent_needs_input"
        /// It has been waiting for input for a while.
        case idlePrompt = "idle_prompt"
        /// The turn stopped (a permission refused in the terminal): it waits for the next prompt.
        case nextPrompt = "next_prompt"
    }
    public var reason: Reason
    public var message: String?
    public init(reason: Reason, message: String? = nil) {
        self.reason = reason
        self.message = message
    }
}

/// Input from the agent side (`agent.event`), the native types of DESIGN.md.
public struct AgentEvent: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        case taskStarted(prompt: String?)
        case toolUse(ToolUse)
        /// TodoWrite todos.
        case progress(todos: [Todo])
        /// `permissionSuggestions`: the agent's own permission updates that
        /// would stop it asking again (Claude Code's `permission_suggestions`),
        /// opaque; "Always allow" hands them back (`DecisionOptions.alwaysAllow`).
        case approvalRequest(requestId: String, tool: ToolUse, timeoutSeconds: Double?, permissionSuggestions: [JSON] = [])
        case approvalCancelled(requestId: String)
        /// The backend's own `approval_timeout` (EDGE-CASES "Approval Request Timeout").
        case approvalTimeout(requestId: String)
        case question(questionId: String, questions: [Question])
        case taskCompleted(summary: String?)
        case taskFailed(error: String?)
        case sessionHandoff(to: String?)
        /// The agent waits for the person outside any request we hold.
        case needsInput(NeedsInput)

        public var typeName: String {
            switch self {
            case .taskStarted: return "task_started"
            case .toolUse: return "tool_use"
            case .progress: return "progress"
            case .approvalRequest: return "approval_request"
            case .approvalCancelled: return "approval_cancelled"
            case .approvalTimeout: return "approval_timeout"
            case .question: return "question"
            case .taskCompleted: return "task_completed"
            case .taskFailed: return "task_failed"
            case .sessionHandoff: return "session_handoff"
            case .needsInput: return "needs_input"
            }
        }
    }
    public var sessionId: String
    public var kind: Kind
    public var projectName: String?
    public var projectPath: String?
    /// When the agent side sent it (same clock as `now`), for notification latency.
    public var sentAt: Millis?

    public init(sessionId: String, kind: Kind, projectName: String? = nil, projectPath: String? = nil,
                sentAt: Millis? = nil) {
        self.sessionId = sessionId
        self.kind = kind
        self.projectName = projectName
        self.projectPath = projectPath
        self.sentAt = sentAt
    }
}

public enum ApprovalDecision: String, Sendable, CaseIterable { case allow, deny }

/// What the person chose besides allow or deny.
/// Each goes with the decision wherever it goes: the waiting agent, the
/// offline queue, the audit log, `approval.resolved`.
public struct DecisionOptions: Equatable, Sendable {
    /// Allow, and apply the request's permission suggestions so the agent
    /// stops asking ("Always allow"). Only with allow, only when the request has some.
    public var alwaysAllow: Bool
    /// Deny: why, for the agent to read, as typed (it never reaches a lock screen).
    public var message: String?
    /// Deny and stop the agent's turn ("Deny and stop").
    public var interrupt: Bool

    public init(alwaysAllow: Bool = false, message: String? = nil, interrupt: Bool = false) {
        self.alwaysAllow = alwaysAllow
        self.message = message
        self.interrupt = interrupt
    }

    public static let none = DecisionOptions()

    /// What of these a decision can carry: alwaysAllow only with allow and
    /// suggestions to apply, a message and interrupt only with deny.
    func fitted(to decision: ApprovalDecision, hasSuggestions: Bool) -> DecisionOptions {
        switch decision {
        case .allow: return DecisionOptions(alwaysAllow: alwaysAllow && hasSuggestions)
        case .deny: return DecisionOptions(message: message, interrupt: interrupt)
        }
    }
}

/// Where a decision was made; counts approvalFromNotification / denialFromNotification.
public enum DecisionSource: String, Sendable, CaseIterable { case app, notification, liveActivity }

/// Everything the engine reacts to.
public enum EngineEvent: Equatable, Sendable {
    case agent(AgentEvent)
    case app(AppUpdate)
    case settings(Settings)
    case approvalResponse(requestId: String, decision: ApprovalDecision, deviceId: String?, source: DecisionSource,
                          options: DecisionOptions = .none)
    case questionAnswer(questionId: String, answers: [String: [String]], deviceId: String?)
    /// Time passed; due deadlines (approval timeouts, reminders) fire.
    case tick
    /// The link to the backend went up or down (`connection.update`; Connectivity.swift).
    case connection(ConnectionChange)
    /// A decision made while the link is down: kept and sent on reconnect.
    case approvalQueued(requestId: String, decision: ApprovalDecision, deviceId: String?, source: DecisionSource,
                        options: DecisionOptions = .none)
    /// The person sent the session a message from a device (`message.send`):
    /// the session continues there (EDGE-CASES "Session Handoff").
    case userMessage(sessionId: String, deviceId: String?)
}
