import BridgeCore
import BridgeEngine

/// The audit log: every decision on an approval, every answered question,
/// every pairing and revocation, with when, which device, over which kind of
/// connection and from where. Entries join the turn's commit, so the reply
/// that reports a decision leaves only once its audit entry is durable.
/// Under --ephemeral nothing is durable: entries stay in memory (the last
/// `memoryLimit`) and never hold a reply back for a commit.
final class AuditLog {
    static let memoryLimit = 1_000

    /// nil: --ephemeral.
    private let store: Store?
    private let log: Logger
    private let now: () -> Int64
    private var memory: [AuditEntry] = []
    private var lastMemoryID: Int64 = 0

    init(store: Store?, log: Logger, now: @escaping () -> Int64) {
        self.store = store
        self.log = log
        self.now = now
    }

    /// Appends an entry caused by `caller` (nil: the server itself, e.g. a
    /// deadline). A failed write rolls the turn back: a decision that
    /// cannot be audited is not acknowledged either.
    func record(_ kind: String, device: String?, caller: RPCContext?, detail: [String: JSON]) {
        var e = AuditEntry(timeMs: now(), kind: kind, deviceId: device, connection: caller?.transport,
                           address: caller?.address, detail: .object(detail))
        guard let store else {
            lastMemoryID += 1
            e.id = lastMemoryID
            memory.append(e)
            if memory.count > Self.memoryLimit { memory.removeFirst(memory.count - Self.memoryLimit) }
            return
        }
        do { try store.appendAudit(e) } catch {
            log.error("audit log: \(kind) not recorded: \(error)")
            store.abortTurn("the audit log could not be written: \(error)")
        }
    }

    /// Up to `limit` entries after `afterId`, in id order.
    func entries(afterId: Int64, limit: Int) throws -> [AuditEntry] {
        guard let store else { return Array(memory.lazy.filter { $0.id > afterId }.prefix(limit)) }
        return try StoreRPCError.call { try store.auditEntries(afterId: afterId, limit: limit) }
    }

    /// Pipeline step: the decisions and answers an engine apply produced,
    /// and decisions queued while the backend link is down.
    func recordDecisions(_ event: EngineEvent, _ t: Engine.Transition, caller: RPCContext?) {
        if case let .approvalQueued(rid, decision, device, source, options) = event, case .approval(let r) = t.reply,
           r.status == .queued {
            var detail: [String: JSON] = ["requestId": .string(rid), "decision": .string(decision.rawValue),
                                          "source": .string(source.rawValue), "queued": true]
            Self.note(options, in: &detail)
            record("approval.decision", device: device ?? caller?.deviceID, caller: caller, detail: detail)
        }
        for e in t.effects {
            switch e {
            case let .approvalResolved(rid, sid, decision, by, options):
                var detail: [String: JSON] = ["requestId": .string(rid), "sessionId": .string(sid),
                                              "decision": .string(decision.rawValue)]
                if decision == .allow || decision == .deny { Self.note(options, in: &detail) }
                record("approval.decision", device: by ?? caller?.deviceID, caller: caller, detail: detail)
            case let .questionAnswered(qid, sid, answers, by):
                record("question.answer", device: by ?? caller?.deviceID, caller: caller,
                       detail: ["questionId": .string(qid), "sessionId": .string(sid),
                                "questions": .array(answers.keys.sorted().map { .string($0) })])
            default: break
            }
        }
    }

    /// What came with a person's allow or deny: always allow, interrupt, and
    /// whether a message was given (not its text: that is for the agent).
    private static func note(_ o: DecisionOptions, in detail: inout [String: JSON]) {
        detail["alwaysAllow"] = .bool(o.alwaysAllow)
        detail["interrupt"] = .bool(o.interrupt)
        detail["withMessage"] = .bool(o.message != nil)
    }

    static func json(_ e: AuditEntry) -> JSON {
        ["id": .int(e.id), "time": .int(e.timeMs), "kind": .string(e.kind), "deviceId": e.deviceId.json,
         "connection": e.connection.json, "address": e.address.json, "detail": e.detail]
    }
}
