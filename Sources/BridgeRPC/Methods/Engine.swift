import BridgeCore
import BridgeEngine

/// The engine's methods: agent input, the person's answers, app state,
/// settings and the queries (see rpc-spec/parts/engine.json).
/// Application errors: -32010 unknown session.
extension MethodTable {
    func registerEngine(_ env: ServerEnvironment) {
        registerAgentInput(env.engine)
        registerDecisions(env.engine, env.decisions)
        registerAppState(env)
        registerQueries(env.engine)
        registerDeepLinks()
    }

    private func registerAgentInput(_ host: EngineHost) {

        // agent.event {sessionId, type, ...}: the native event types of DESIGN.md.
        on("agent.event") { p, _ in
            let event = try EngineParams.agentEvent(p)
            try host.refuseReusedIds([.agent(event)])
            host.apply(.agent(event))
            let s = host.engine.session(event.sessionId)
            return ["sessionId": .string(event.sessionId), "status": .string(s?.status.rawValue ?? "idle")]
        }
    }

    /// The person's answers: approvals and questions.
    private func registerDecisions(_ host: EngineHost, _ decisions: OfflineDecisions?) {
        on("approval.respond") { p, ctx in
            let rid: String = try p.required("requestId")
            let decision = ApprovalDecision(rawValue: try p.oneOf("decision", ApprovalDecision.allCases.map(\.rawValue)))!
            let device = try p.deviceId(or: ctx)
            let source = DecisionSource(rawValue: try p.oneOf("source", DecisionSource.allCases.map(\.rawValue), default: "app"))!
            let options = try EngineParams.decisionOptions(p, decision, requestId: rid, host.engine)
            if let decisions {
                return EngineCoding.approvalRespond(try decisions.respond(rid, decision, device: device, source: source,
                                                                          options: options))
            }
            let t = host.apply(.approvalResponse(requestId: rid, decision: decision, deviceId: device, source: source,
                                                 options: options))
            guard case .approval(let r) = t.reply else { throw RPCError.internalError("engine gave no approval reply") }
            return EngineCoding.approvalRespond(r)
        }

        on("approval.list") { p, _ in
            let sid: String? = try p.optional("sessionId")
            let now = host.now
            let list = host.engine.pendingApprovals.filter { sid == nil || $0.sessionId == sid }
            return ["approvals": .array(list.map { EngineCoding.approval($0, now: now, services: host.services) })]
        }

        on("question.answer") { p, ctx in
            let qid: String = try p.required("questionId")
            let raw: [String: JSON] = try p.required("answers")
            var answers: [String: [String]] = [:]
            for (k, v) in raw {
                switch v {
                case .string(let s): answers[k] = [s]
                case .array(let a) where a.allSatisfy({ $0.stringValue != nil }): answers[k] = a.compactMap(\.stringValue)
                default:
                    throw RPCError.invalidParams("invalid params: answers['\(k)'] must be a string or an array of strings",
                                                 data: ["param": "answers", "key": .string(k), "expected": "string | string[]",
                                                        "got": .string(v.typeName)])
                }
            }
            let device = try p.deviceId(or: ctx)
            let t = host.apply(.questionAnswer(questionId: qid, answers: answers, deviceId: device))
            guard case .question(let r) = t.reply else { throw RPCError.internalError("engine gave no question reply") }
            if r.status == .invalid {
                throw RPCError.invalidParams("invalid params: \(r.problem ?? "answers do not fit the question")",
                                             data: ["param": "answers", "questionId": .string(qid),
                                                    "problem": .string(r.problem ?? "")])
            }
            return ["status": .string(r.status.rawValue), "questionId": .string(qid), "sessionId": r.sessionId.json]
        }
    }

    private func registerAppState(_ env: ServerEnvironment) {
        let host = env.engine
        on("app.update") { p, ctx in
            var u = try EngineParams.appUpdate(p)
            u.deviceId = ctx.namedDevice
            if let phase = u.phase { env.push?.appPhase(phase, device: ctx.deviceID) }
            host.apply(.app(u))
            return ["app": EngineCoding.app(host.engine.app),
                    "liveActivityStatus": .string(host.engine.liveActivityStatus.rawValue)]
        }

        on("settings.get") { _, _ in
            ["settings": host.engine.settings.json,
             "supportedLocales": .array(Localization.supportedLocales.map { .string($0) })]
        }

        on("settings.update") { p, _ in
            let s: Settings
            do throws(SettingsError) { s = try host.engine.settings.updated(with: p.raw?.objectValue ?? [:]) } catch {
                throw RPCError.invalidParams(error.message, data: error.data)
            }
            if p.has("customRedactionRules") { try host.validateRules(s.customRedactionRules) }
            host.installCompiledRules()
            host.apply(.settings(s))
            return ["settings": host.engine.settings.json,
                    "supportedLocales": .array(Localization.supportedLocales.map { .string($0) })]
        }
    }

    private func registerQueries(_ host: EngineHost) {
        on("session.list") { p, _ in
            let status = try p.value("status").map { _ in
                try p.oneOf("status", SessionStatus.allCases.map(\.rawValue))
            }
            let now = host.now
            let list = host.engine.sessions.filter { status == nil || $0.status.rawValue == status }
            return ["sessions": .array(list.map {
                EngineCoding.session($0, now: now, services: host.services, strings: host.strings, full: false)
            })]
        }

        on("session.get") { p, _ in
            let sid: String = try p.required("sessionId")
            guard let s = host.engine.session(sid) else {
                throw RPCError.application(-32010, "Unknown session", data: ["sessionId": .string(sid),
                    "reason": "no event has been received for this session"])
            }
            return ["session": EngineCoding.session(s, now: host.now, services: host.services, strings: host.strings, full: true)]
        }

        on("activity.get") { _, _ in
            let c = host.engine.currentActivity(now: host.now)
            return ["activity": c.map(EngineCoding.activity) ?? .null,
                    "liveActivityStatus": .string(host.engine.liveActivityStatus.rawValue)]
        }

        on("metrics.get") { _, _ in Self.metrics(host) }

        // What only the app sees (EDGE-CASES Analytics): taps, dismissals,
        // delivery and Live Activity start failures, recovery attempts.
        on("metrics.record") { p, _ in
            let name = try p.oneOf("metric", BackgroundMetric.appReported.map(\.rawValue))
            let count: Int = try p.optional("count") ?? 1
            guard (1...1000).contains(count) else {
                throw RPCError.invalidParams("invalid params: 'count' must be in 1...1000",
                                             data: ["param": "count", "expected": "integer 1...1000", "got": .int(Int64(count))])
            }
            host.recordAppMetric(BackgroundMetric(rawValue: name)!, count: count)
            return Self.metrics(host)
        }
    }

    private func registerDeepLinks() {
        on("deeplink.parse") { p, _ in
            let url: String = try p.required("url")
            switch DeepLink.parse(url) {
            case .success(let l): return EngineCoding.deepLink(l)
            case .failure(let e):
                let reason: String
                switch e {
                case .notCodingBridge: reason = "not a codingbridge:// URL"
                case .unknownRoute(let r): reason = "unknown route '\(r)'"
                case .badEncoding(let part): reason = "bad path component '\(part)' (empty or invalid percent-encoding)"
                }
                throw RPCError.invalidParams("invalid params: \(reason)",
                                             data: ["param": "url", "reason": .string(reason), "got": .string(url),
                                                    "routes": ["codingbridge://session/{id}",
                                                               "codingbridge://session/{id}/approval/{requestId}",
                                                               "codingbridge://session/{id}/question/{questionId}",
                                                               "codingbridge://settings/notifications"]])
            }
        }
    }
}

/// Params -> engine values, with -32602 errors that name the offending field.
enum EngineParams {
    static let eventTypes = ["task_started", "tool_use", "progress", "approval_request", "approval_cancelled",
                             "approval_timeout", "question", "task_completed", "task_failed", "session_handoff",
                             "needs_input"]

    static func bad(_ param: String, _ expected: String, _ got: JSON) -> RPCError {
        .invalidParams("invalid params: '\(param)' must be \(expected)",
                       data: ["param": .string(param), "expected": .string(expected), "got": .string(got.typeName)])
    }

    static func tool(_ p: Params) throws -> ToolUse {
        let name: String = try p.optional("toolName") ?? p.required("tool")
        var t = ToolUse(name: name)
        if let input = p.value("input") {
            guard let o = input.objectValue else { throw bad("input", "object", input) }
            func str(_ k: String) throws -> String? {
                guard let v = o[k], v != .null else { return nil }
                guard let s = v.stringValue else { throw bad("input.\(k)", "string", v) }
                return s
            }
            t.command = try str("command")
            t.filePath = try str("file_path") ?? str("notebook_path") ?? str("path")
            t.pattern = try str("pattern")
            t.url = try str("url") ?? str("query")
            t.description = try str("description")
        }
        if let summary: String = try p.optional("summary"), t.command == nil, t.filePath == nil, t.url == nil {
            t.description = summary
        }
        return t
    }

    static func todos(_ p: Params) throws -> [Todo] {
        let arr: [JSON] = try p.required("todos")
        return try arr.enumerated().map { i, v in
            guard let o = v.objectValue else { throw bad("todos[\(i)]", "object", v) }
            guard let content = o["content"]?.stringValue else { throw bad("todos[\(i)].content", "string", o["content"] ?? .null) }
            let st = o["status"]?.stringValue ?? ""
            guard let state = Todo.State(rawValue: st) else {
                throw RPCError.invalidParams("invalid params: 'todos[\(i)].status' must be one of pending, in_progress, completed",
                                             data: ["param": .string("todos[\(i)].status"),
                                                    "expected": ["pending", "in_progress", "completed"],
                                                    "got": o["status"].map { $0.stringValue.map(JSON.string) ?? .string($0.typeName) } ?? "missing"])
            }
            let af = o["activeForm"]
            if let af, af != .null, af.stringValue == nil { throw bad("todos[\(i)].activeForm", "string", af) }
            return Todo(content: content, status: state, activeForm: af?.stringValue)
        }
    }

    static func questions(_ p: Params) throws -> [Question] {
        let arr: [JSON] = try p.required("questions")
        guard !arr.isEmpty else {
            throw RPCError.invalidParams("invalid params: 'questions' must not be empty",
                                         data: ["param": "questions", "expected": "non-empty array", "got": "array"])
        }
        return try arr.enumerated().map { i, v in
            guard let o = v.objectValue else { throw bad("questions[\(i)]", "object", v) }
            guard let q = o["question"]?.stringValue else { throw bad("questions[\(i)].question", "string", o["question"] ?? .null) }
            var options: [Question.Option] = []
            if let ov = o["options"], ov != .null {
                guard let oa = ov.arrayValue else { throw bad("questions[\(i)].options", "array", ov) }
                for (j, x) in oa.enumerated() {
                    guard let label = x["label"]?.stringValue else { throw bad("questions[\(i)].options[\(j)].label", "string", x["label"] ?? .null) }
                    options.append(.init(label: label, description: x["description"]?.stringValue))
                }
            }
            return Question(question: q, header: o["header"]?.stringValue, options: options,
                            multiSelect: o["multiSelect"]?.boolValue ?? false)
        }
    }

    /// approval_request's `permissionSuggestions`: at most 16 objects of at
    /// most 4 KB serialized each (what the approval can keep), else -32602.
    static func permissionSuggestions(_ p: Params) throws -> [JSON] {
        guard let v = p.value("permissionSuggestions") else { return [] }
        guard let all = v.arrayValue else { throw bad("permissionSuggestions", "array", v) }
        let most = ApprovalRequest.maxPermissionSuggestions
        guard all.count <= most else {
            throw RPCError.invalidParams("invalid params: 'permissionSuggestions' holds \(all.count) items, at most \(most) are allowed",
                                         data: ["param": "permissionSuggestions", "expected": .string("array of at most \(most) items"),
                                                "got": .string("array of \(all.count) items")])
        }
        for (i, s) in all.enumerated() {
            if let why = ApprovalRequest.problem(withSuggestion: s) {
                throw RPCError.invalidParams("invalid params: 'permissionSuggestions[\(i)]' \(why)",
                                             data: ["param": .string("permissionSuggestions[\(i)]"),
                                                    "expected": .string("object of at most \(ApprovalRequest.maxPermissionSuggestionBytes) bytes serialized"),
                                                    "got": .string(s.objectValue == nil ? s.typeName : "object of \(s.encoded.count) bytes")])
            }
        }
        return all
    }

    /// approval.respond's `alwaysAllow`, `message` and `interrupt`, each only
    /// with the decision it belongs to; "Always allow" only for a request
    /// that has permission suggestions to apply. Anything else is -32602.
    static func decisionOptions(_ p: Params, _ decision: ApprovalDecision, requestId rid: String,
                                _ engine: Engine) throws -> DecisionOptions {
        let alwaysAllow: Bool = try p.optional("alwaysAllow") ?? false
        let message: String? = try p.optional("message")
        let interrupt: Bool = try p.optional("interrupt") ?? false
        func only(_ param: String, with wanted: ApprovalDecision) -> RPCError {
            .invalidParams("invalid params: '\(param)' goes only with decision '\(wanted.rawValue)', not '\(decision.rawValue)'",
                           data: ["param": .string(param), "expected": .string("decision '\(wanted.rawValue)'"),
                                  "got": .string("decision '\(decision.rawValue)'")])
        }
        switch decision {
        case .allow:
            if message != nil { throw only("message", with: .deny) }
            if interrupt { throw only("interrupt", with: .deny) }
            // A request no longer pending gets its status (alreadyResolved, expired, unknown) as usual.
            if alwaysAllow, let sid = engine.owner(ofApproval: rid),
               let a = engine.session(sid)?.pendingApprovals.first(where: { $0.requestId == rid }), a.permissionSuggestions.isEmpty {
                throw RPCError.invalidParams(
                    "invalid params: 'alwaysAllow' applies the request's permission suggestions, and request '\(rid)' has none: allow it without alwaysAllow",
                    data: ["param": "alwaysAllow", "expected": "a request with permissionSuggestions",
                           "got": "a request without permissionSuggestions", "requestId": .string(rid)])
            }
        case .deny:
            if alwaysAllow { throw only("alwaysAllow", with: .allow) }
        }
        return DecisionOptions(alwaysAllow: alwaysAllow, message: message, interrupt: interrupt)
    }

    static func agentEvent(_ p: Params) throws -> AgentEvent {
        let sid = try p.nonEmpty("sessionId")
        let type = try p.oneOf("type", eventTypes)
        let kind: AgentEvent.Kind
        switch type {
        case "task_started": kind = .taskStarted(prompt: try p.optional("prompt"))
        case "tool_use": kind = .toolUse(try tool(p))
        case "progress": kind = .progress(todos: try todos(p))
        case "approval_request":
            // 1...86400 s, like settings.approvalTimeoutSeconds: the contract's range.
            let timeout: Double? = try p.optional("timeoutSeconds")
            kind = .approvalRequest(requestId: try p.nonEmpty("requestId"), tool: try tool(p), timeoutSeconds: timeout,
                                    permissionSuggestions: try permissionSuggestions(p))
        case "approval_cancelled": kind = .approvalCancelled(requestId: try p.nonEmpty("requestId"))
        case "approval_timeout": kind = .approvalTimeout(requestId: try p.nonEmpty("requestId"))
        case "question": kind = .question(questionId: try p.nonEmpty("questionId"), questions: try questions(p))
        case "task_completed": kind = .taskCompleted(summary: try p.optional("summary"))
        case "task_failed": kind = .taskFailed(error: try p.optional("error"))
        case "needs_input":
            let reason = try p.oneOf("reason", NeedsInput.Reason.allCases.map(\.rawValue))
            kind = .needsInput(NeedsInput(reason: NeedsInput.Reason(rawValue: reason)!, message: try p.optional("message")))
        default: kind = .sessionHandoff(to: try p.optional("handedOffTo"))
        }
        return AgentEvent(sessionId: sid, kind: kind, projectName: try p.optional("projectName"),
                          projectPath: try p.optional("projectPath"), sentAt: try p.optional("sentAt"))
    }

    static func appUpdate(_ p: Params) throws -> AppUpdate {
        var u = AppUpdate()
        if p.has("phase") { u.phase = AppState.Phase(rawValue: try p.oneOf("phase", AppState.Phase.allCases.map(\.rawValue))) }
        u.lowPowerMode = try p.optional("lowPowerMode")
        if let n = p.value("network") {
            guard let o = n.objectValue else { throw bad("network", "object", n) }
            let np = try Params(.object(o))
            u.networkConnected = try np.optional("connected")
            if np.has("type") { u.networkType = AppState.ConnectionType(rawValue: try np.oneOf("type", AppState.ConnectionType.allCases.map(\.rawValue))) }
        }
        if let perm = p.value("permissions") {
            guard let o = perm.objectValue else { throw bad("permissions", "object", perm) }
            let pp = try Params(.object(o))
            if pp.has("notifications") {
                u.notificationPermission = AppState.NotificationPermission(
                    rawValue: try pp.oneOf("notifications", AppState.NotificationPermission.allCases.map(\.rawValue)))
            }
            u.liveActivitiesPermitted = try pp.optional("liveActivities")
        }
        u.backgroundTimeExpired = try p.optional("backgroundTimeExpired") ?? false
        return u
    }
}

extension MethodTable {
    /// The engine's counters and the push figures (metrics.get, metrics.record).
    static func metrics(_ host: EngineHost) -> JSON {
        var m = EngineCoding.metrics(host.engine.metrics).objectValue ?? [:]
        m["push"] = host.env.push?.metrics.json ?? PushMetrics().json
        return .object(m)
    }
}
