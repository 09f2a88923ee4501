@testable import BridgeEngine
import BridgeCore

/// A manual clock around the engine: time moves only when a test says so.
struct Harness {
    var engine: Engine
    var now: Millis = 1_000_000

    /// The real services, as the server wires them: BridgeCore's Redactor
    /// (PCRE2 catalog) and ElapsedFormatter.
    static let services = EngineServices(
        redact: { Redactor.builtIn.redacted($0) },
        formatElapsed: { ElapsedFormatter.english.string(seconds: Double($0)) })

    init(settings: Settings = Settings(), background: Bool = false) {
        engine = Engine(services: Harness.services, settings: settings)
        if background { _ = send(.app(AppUpdate(phase: .background))) }
    }

    @discardableResult
    mutating func send(_ e: EngineEvent) -> [Effect] { engine.apply(e, now: now).effects }

    @discardableResult
    mutating func agent(_ sid: String, _ kind: AgentEvent.Kind, project: String? = "MyApp") -> [Effect] {
        send(.agent(AgentEvent(sessionId: sid, kind: kind, projectName: project, projectPath: project.map { "~/code/\($0)" })))
    }

    /// Moves the clock and lets due deadlines fire.
    @discardableResult
    mutating func advance(seconds: Double) -> [Effect] {
        now += Millis((seconds * 1000).rounded())
        return send(.tick)
    }

    mutating func respond(_ rid: String, _ d: ApprovalDecision, device: String? = nil,
                          source: DecisionSource = .app) -> (ApprovalRespondResult, [Effect]) {
        let t = engine.apply(.approvalResponse(requestId: rid, decision: d, deviceId: device, source: source), now: now)
        guard case .approval(let r) = t.reply else { fatalError("no approval reply") }
        return (r, t.effects)
    }

    mutating func setBackground(_ bg: Bool) -> [Effect] { send(.app(AppUpdate(phase: bg ? .background : .foreground))) }
}

extension Array where Element == Effect {
    var posts: [NotificationRequest] { compactMap { if case .postNotification(let n) = $0 { return n }; return nil } }
    var banners: [Banner] { compactMap { if case .showBanner(let b) = $0 { return b }; return nil } }
    var clears: [String] { flatMap { e -> [String] in if case .clearNotifications(let ids) = e { return ids }; return [] } }
    var starts: [ActivityContent] { compactMap { if case .startActivity(let c) = $0 { return c }; return nil } }
    var updates: [ActivityContent] { compactMap { if case .updateActivity(let c) = $0 { return c }; return nil } }
    var ends: [ActivityContent] { compactMap { if case .endActivity(let c) = $0 { return c }; return nil } }
    var badges: [Int] { compactMap { if case .updateBadge(let n) = $0 { return n }; return nil } }
    var resolutions: [(String, ApprovalResolution)] {
        compactMap { if case let .approvalResolved(rid, _, d, _, _) = $0 { return (rid, d) }; return nil }
    }
}

let npmTest = ToolUse(name: "Bash", command: "npm test")

/// An Anthropic-style API key: the real redactor must catch it.
let secret = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4Y5z6" + "AA"
