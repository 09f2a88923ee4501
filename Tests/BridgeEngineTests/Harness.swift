@testable import BridgeEngine

/// A manual clock around the engine: time moves only when a test says so.
struct Harness {
    var engine: Engine
    var now: Millis = 1_000_000

    /// Until BridgeCore's ElapsedFormatter/Redactor are wired here, these stand
    /// in; the engine only needs *a* formatter and *a* redactor.
    static let services = EngineServices(
        redact: { $0.replacingAll("sk-live-SECRET123", with: "[REDACTED]") },
        formatElapsed: { s in s >= 3600 ? "\(s / 3600):\(pad((s / 60) % 60)):\(pad(s % 60))" : "\(s / 60):\(pad(s % 60))" })

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

func pad(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

extension String {
    func replacingAll(_ a: String, with b: String) -> String {
        guard !a.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let r = rest.range(of: a) {
            out += rest[..<r.lowerBound]
            out += b
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}

extension Substring {
    func range(of needle: String) -> Range<Index>? {
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(needle) { return i..<index(i, offsetBy: needle.count) }
            i = index(after: i)
        }
        return nil
    }
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
        compactMap { if case let .approvalResolved(rid, _, d, _) = $0 { return (rid, d) }; return nil }
    }
}

let npmTest = ToolUse(name: "Bash", command: "npm test")
