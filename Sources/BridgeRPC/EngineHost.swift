import BridgeCore
import BridgeEngine

/// Runs the pure engine inside the server: takes time from `env.scheduler`
/// (manual under `--manual-clock`), hands every transition to the server's
/// pipeline (`ServerEnvironment.afterApply`), and keeps one scheduler timeout
/// armed for the engine's next deadline. Loop thread only, like everything
/// in the server.
public final class EngineHost {
    public private(set) var engine: Engine
    /// unowned: the environment owns its engine (`ServerEnvironment.engine`).
    unowned let env: ServerEnvironment
    private var timer: TimeoutScheduler.Handle?
    private var timerAt: Millis?
    /// The redactor the engine uses: built-in catalog plus the custom rules of
    /// Settings, recompiled when they change (a box so the engine's closure
    /// always sees the current one).
    final class RedactorBox { var redactor = Redactor.builtIn }
    private let box: RedactorBox

    /// With the given services (tests); custom redaction rules are then only validated.
    public init(env: ServerEnvironment, services: EngineServices, settings: Settings = Settings()) {
        self.env = env
        box = RedactorBox()
        engine = Engine(services: services, settings: settings)
    }

    private init(env: ServerEnvironment, box: RedactorBox, services: EngineServices) {
        self.env = env
        self.box = box
        engine = Engine(services: services)
    }

    /// The real services: BridgeCore's `Redactor` and `ElapsedFormatter`.
    public convenience init(env: ServerEnvironment) {
        let box = RedactorBox()
        let formatter = ElapsedFormatter.english
        self.init(env: env, box: box, services: EngineServices(
            redact: { [box] in box.redactor.redacted($0) },
            formatElapsed: { formatter.string(seconds: Double($0)) }))
    }

    /// Compiles the custom rules with the built-in catalog; a bad pattern is a
    /// -32602 carrying PCRE2's message and offset. Installed by settings.update.
    func validateRules(_ rules: [RedactionRule]) throws {
        do {
            compiled = try Redactor(customRules: rules.map { RedactionRuleSpec(id: $0.name, pattern: $0.pattern, replacement: $0.replacement) })
        } catch let e as RedactionPatternError {
            throw RPCError.invalidParams("invalid params: customRedactionRules[\(e.ruleIndex)].pattern: \(e.message) at offset \(e.offset)",
                                         data: ["param": .string("customRedactionRules[\(e.ruleIndex)].pattern"),
                                                "rule": .string(e.ruleId), "message": .string(e.message),
                                                "offset": .int(Int64(e.offset))])
        }
    }
    private var compiled: Redactor?

    /// Makes the rules checked by `validateRules` the ones the engine uses.
    func installCompiledRules() {
        if let c = compiled { box.redactor = c; env.redactor = c }
        compiled = nil
    }

    /// Engine time: wall-clock milliseconds as the scheduler sees them (manual
    /// epoch + advanced time under `--manual-clock`), so expiresAt/startedAt
    /// are real dates for clients.
    public var now: Millis { env.scheduler.wallClockMs }

    public var services: EngineServices { engine.services }
    public var strings: Strings { Strings(locale: engine.settings.locale) }

    /// -32012 when an agent's approval or question id already belongs to
    /// another session. The same session repeating it is a retry and stays
    /// harmless; another session's request would be dropped unseen.
    public func refuseReusedIds(_ events: [EngineEvent]) throws {
        for case .agent(let e) in events {
            let owner: String?, id: String
            switch e.kind {
            case .approvalRequest(let rid, _, _, _): (owner, id) = (engine.owner(ofApproval: rid), rid)
            case .question(let qid, _): (owner, id) = (engine.owner(ofQuestion: qid), qid)
            default: continue
            }
            if let owner, owner != e.sessionId { throw RPCError.requestIdInUse(id, owner: owner, by: e.sessionId) }
        }
    }

    @discardableResult
    public func apply(_ event: EngineEvent) -> Engine.Transition {
        let t = engine.apply(event, now: now)
        env.afterApply(event, t)
        armTimer()
        return t
    }

    /// Changes the engine as a whole (continuity: restoring a snapshot), then
    /// re-arms the deadline timer.
    public func withEngine<R>(_ body: (inout Engine) throws -> R) rethrows -> R {
        defer { armTimer() }
        return try body(&engine)
    }

    /// An app-side Analytics counter (`metrics.record`).
    public func recordAppMetric(_ m: BackgroundMetric, count: Int) { engine.recordAppMetric(m, count: count) }

    /// The notification params for one effect.
    public func payload(_ e: Effect, now: Millis) -> JSON {
        switch e {
        case .postNotification(let n): return EngineCoding.notification(n)
        case .clearNotifications(let ids): return ["ids": .array(ids.map { .string($0) })]
        case .showBanner(let b): return EngineCoding.banner(b)
        case .startActivity(let c), .updateActivity(let c), .endActivity(let c): return EngineCoding.activity(c)
        case .updateBadge(let n): return ["count": .int(Int64(n))]
        case let .approvalResolved(rid, sid, d, by, options):
            // The deny message stays with the agent: it is not broadcast.
            return ["requestId": .string(rid), "sessionId": .string(sid), "decision": .string(d.rawValue), "by": by.json,
                    "alwaysAllow": .bool(options.alwaysAllow), "interrupt": .bool(options.interrupt)]
        case let .questionAnswered(qid, sid, answers, by):
            return ["questionId": .string(qid), "sessionId": .string(sid), "by": by.json,
                    "answers": .object(answers.mapValues { .array($0.map { .string($0) }) })]
        case let .connectionRetry(attempt, delayMs):
            return ["attempt": .int(Int64(attempt)), "delayMs": .int(delayMs)]
        case let .endBackgroundWork(reason, sid):
            return ["reason": .string(reason.rawValue), "sessionId": .string(sid)]
        case .sessionChanged(let sid):
            guard let s = engine.session(sid) else { return ["session": .null] }
            return ["session": EngineCoding.session(s, now: now, services: engine.services, strings: strings, full: false)]
        }
    }

    /// One scheduler entry for the engine's earliest deadline; re-armed only
    /// when that deadline moves, so 50k events/s do not churn the timer heap.
    private func armTimer() {
        let next = engine.nextDeadline
        guard next != timerAt else { return }
        if let h = timer { _ = env.scheduler.cancel(h) }
        timer = nil
        timerAt = next
        guard let next else { return }
        let (ahead, overflow) = next.subtractingReportingOverflow(now)
        let delay = overflow ? (next > now ? UInt64.max : 0) : UInt64(max(0, ahead))
        timer = env.scheduler.schedule(afterMs: delay) { [weak self] in
            guard let self else { return }
            self.timer = nil
            self.timerAt = nil
            self.apply(.tick)
        }
    }
}
