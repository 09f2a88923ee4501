import BridgeCore
import BridgeEngine

// JSON <-> engine values. The RPC layer only translates: every shape here is
// documented in rpc-spec/parts/engine.json (schemas EngineSession, Notification, ...).

extension Optional where Wrapped == String {
    var json: JSON { map { .string($0) } ?? .null }
}

private func ms(_ v: Millis?) -> JSON { v.map { .int($0) } ?? .null }

enum EngineCoding {
    static func progress(_ p: TodoProgress?, _ strings: Strings) -> JSON {
        guard let p else { return .null }
        return ["completed": .int(Int64(p.completed)), "total": .int(Int64(p.total)), "current": p.current.json,
                "text": .string(strings.format("activity.progress", String(p.completed), String(p.total)))]
    }

    static func approval(_ a: ApprovalRequest, now: Millis, services: EngineServices) -> JSON {
        [
            "requestId": .string(a.requestId), "sessionId": .string(a.sessionId), "toolName": .string(a.tool.name),
            // In-app view: details shown, secrets still redacted (US-4.2).
            "summary": .string(Privacy.truncate(services.redact(a.tool.detail), to: Privacy.maxDetailCharacters)),
            "createdAt": .int(a.createdAt), "expiresAt": .int(a.expiresAt),
            "remainingSeconds": .double(Double(max(0, a.expiresAt - now)) / 1000),
            "deepLink": .string(DeepLink.approval(sessionId: a.sessionId, requestId: a.requestId).url),
            // "Always allow" is offered when this is not empty. Shown like the
            // summary: string values through the redactor (the agent gets them as sent).
            "permissionSuggestions": .array(a.permissionSuggestions.map { redactStrings($0, services) }),
        ]
    }

    private static func redactStrings(_ v: JSON, _ services: EngineServices) -> JSON {
        switch v {
        case .string(let s): return .string(services.redact(s))
        case .array(let a): return .array(a.map { redactStrings($0, services) })
        case .object(let o): return .object(o.mapValues { redactStrings($0, services) })
        default: return v
        }
    }

    static func question(_ q: Question) -> JSON {
        ["question": .string(q.question), "header": q.header.json, "multiSelect": .bool(q.multiSelect),
         "options": .array(q.options.map { ["label": .string($0.label), "description": $0.description.json] })]
    }

    static func questionRequest(_ q: QuestionRequest) -> JSON {
        ["questionId": .string(q.questionId), "sessionId": .string(q.sessionId), "createdAt": .int(q.createdAt),
         "questions": .array(q.questions.map(question)),
         "deepLink": .string(DeepLink.question(sessionId: q.sessionId, questionId: q.questionId).url)]
    }

    static func session(_ s: Session, now: Millis, services: EngineServices, strings: Strings, full: Bool) -> JSON {
        var o: [String: JSON] = [
            "id": .string(s.id), "projectName": s.projectName.json, "projectPath": s.projectPath.json,
            "status": .string(s.status.rawValue), "operation": s.operation.json,
            "progress": progress(s.progress, strings), "startedAt": ms(s.startedAt),
            "lastActivityAt": .int(s.lastActivityAt),
            "elapsedSeconds": s.elapsedSeconds(at: now).map { .int(Int64($0)) } ?? .null,
            "elapsed": s.elapsedSeconds(at: now).map { .string(services.formatElapsed($0)) } ?? .null,
            "pendingApprovalCount": .int(Int64(s.pendingApprovals.count)),
            "pendingQuestionCount": .int(Int64(s.pendingQuestions.count)),
            "activeDevice": s.activeDevice.json, "message": s.message.json,
            "deepLink": .string(DeepLink.session(id: s.id).url),
        ]
        if full {
            o["pendingApprovals"] = .array(s.pendingApprovals.map { approval($0, now: now, services: services) })
            o["pendingQuestions"] = .array(s.pendingQuestions.map(questionRequest))
            o["history"] = .array(s.history.map {
                ["at": .int($0.at), "kind": .string($0.kind.rawValue), "id": .string($0.id),
                 "toolName": $0.toolName.json, "by": $0.by.json]
            })
        }
        return .object(o)
    }

    static func action(_ a: NotificationAction) -> JSON {
        ["id": .string(a.id), "title": .string(a.title), "foreground": .bool(a.foreground), "destructive": .bool(a.destructive)]
    }

    static func notification(_ n: NotificationRequest) -> JSON {
        ["id": .string(n.id), "title": .string(n.title), "body": .string(n.body), "category": .string(n.category.rawValue),
         "actions": .array(n.actions.map(action)), "interruptionLevel": .string(n.interruptionLevel.rawValue),
         "sound": .bool(n.sound), "threadId": .string(n.threadId), "badge": .int(Int64(n.badge)),
         "deepLink": .string(n.deepLink), "userInfo": .object(n.userInfo.mapValues { .string($0) })]
    }

    static func banner(_ b: Banner) -> JSON {
        ["id": .string(b.id), "style": .string(b.style.rawValue), "title": .string(b.title), "body": .string(b.body),
         "sessionId": b.sessionId.json, "deepLink": b.deepLink.json, "actions": .array(b.actions.map(action))]
    }

    static func activity(_ c: ActivityContent) -> JSON {
        [
            "sessionId": .string(c.sessionId), "projectName": .string(c.projectName), "projectPath": c.projectPath.json,
            "status": .string(c.status.rawValue), "statusText": .string(c.statusText), "operation": c.operation.json,
            "progress": c.progress.map { ["completed": .int(Int64($0.completed)), "total": .int(Int64($0.total)),
                                          "current": $0.current.json] } ?? .null,
            "progressText": c.progressText.json, "startedAt": ms(c.startedAt),
            "elapsedSeconds": .int(Int64(c.elapsedSeconds)),
            "approval": c.approval.map {
                ["requestId": .string($0.requestId), "toolName": .string($0.toolName), "summary": .string($0.summary),
                 "expiresAt": .int($0.expiresAt)]
            } ?? .null,
            "message": c.message.json, "device": c.device.json,
            "rendered": ["compact": .string(c.rendered.compact), "expanded": .string(c.rendered.expanded),
                         "lockScreen": .string(c.rendered.lockScreen)],
        ]
    }

    static func app(_ a: AppState) -> JSON {
        ["phase": .string(a.phase.rawValue), "lowPowerMode": .bool(a.lowPowerMode),
         "network": ["connected": .bool(a.networkConnected), "type": .string(a.networkType.rawValue)],
         "permissions": ["notifications": .string(a.notificationPermission.rawValue),
                         "liveActivities": .bool(a.liveActivitiesPermitted)]]
    }

    /// The result of `approval.respond`.
    static func approvalRespond(_ r: ApprovalRespondResult) -> JSON {
        ["status": .string(r.status.rawValue), "requestId": .string(r.requestId), "sessionId": r.sessionId.json,
         "resolution": r.resolution.map { .string($0.rawValue) } ?? .null]
    }

    static func metrics(_ m: Metrics) -> JSON {
        var counters: [String: JSON] = [:]
        for c in BackgroundMetric.allCases { counters[c.rawValue] = .int(Int64(m[c])) }
        return ["counters": .object(counters), "missedApprovals": .int(Int64(m.missedApprovals)),
                "notificationLatencyMs": ["count": .int(Int64(m.latencyCount)),
                                          "average": m.latencyAverageMs.map { .double($0) } ?? .null,
                                          "max": .int(m.latencyMaxMs),
                                          "implausibleSentAt": .int(Int64(m.implausibleSentAt))],
                "recoveryRate": .double(m.recoveryRate)]
    }

    static func deepLink(_ l: DeepLink) -> JSON {
        var o: [String: JSON] = ["route": .string(l.routeName), "url": .string(l.url)]
        switch l {
        case .session(let id): o["sessionId"] = .string(id)
        case let .approval(s, r): o["sessionId"] = .string(s); o["requestId"] = .string(r)
        case let .question(s, q): o["sessionId"] = .string(s); o["questionId"] = .string(q)
        case .notificationSettings: break
        }
        return .object(o)
    }
}
