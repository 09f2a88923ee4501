import BridgeCore
import BridgeEngine

/// The audit log: every decision on an approval, every answered question,
/// every pairing and revocation, with when, which device, over which kind of
/// connection and from where. Entries join the turn's commit, so the reply
/// that reports a decision leaves only once its audit entry is durable.
final class AuditLog {
    private let store: Store
    private let log: Logger
    private let now: () -> Int64

    init(store: Store, log: Logger, now: @escaping () -> Int64) {
        self.store = store
        self.log = log
        self.now = now
    }

    /// Appends an entry caused by `caller` (nil: the server itself, e.g. a
    /// deadline). A failed write rolls the turn back: a decision that
    /// cannot be audited is not acknowledged either.
    func record(_ kind: String, device: String?, caller: RPCContext?, detail: [String: JSON]) {
        let e = AuditEntry(timeMs: now(), kind: kind, deviceId: device, connection: caller?.transport,
                           address: caller?.address, detail: .object(detail))
        do { try store.appendAudit(e) } catch {
            log.error("audit log: \(kind) not recorded: \(error)")
            store.abortTurn("the audit log could not be written: \(error)")
        }
    }

    /// Pipeline step: the decisions and answers an engine apply produced,
    /// and decisions queued while the backend link is down.
    func recordDecisions(_ event: EngineEvent, _ t: Engine.Transition, caller: RPCContext?) {
        if case let .approvalQueued(rid, decision, device, source) = event, case .approval(let r) = t.reply, r.status == .queued {
            record("approval.decision", device: device ?? caller?.deviceID, caller: caller,
                   detail: ["requestId": .string(rid), "decision": .string(decision.rawValue),
                            "source": .string(source.rawValue), "queued": true])
        }
        for e in t.effects {
            switch e {
            case let .approvalResolved(rid, sid, decision, by):
                record("approval.decision", device: by ?? caller?.deviceID, caller: caller,
                       detail: ["requestId": .string(rid), "sessionId": .string(sid), "decision": .string(decision.rawValue)])
            case let .questionAnswered(qid, sid, answers, by):
                record("question.answer", device: by ?? caller?.deviceID, caller: caller,
                       detail: ["questionId": .string(qid), "sessionId": .string(sid),
                                "questions": .array(answers.keys.sorted().map { .string($0) })])
            default: break
            }
        }
    }

    static func json(_ e: AuditEntry) -> JSON {
        ["id": .int(e.id), "time": .int(e.timeMs), "kind": .string(e.kind), "deviceId": e.deviceId.json,
         "connection": e.connection.json, "address": e.address.json, "detail": e.detail]
    }
}
