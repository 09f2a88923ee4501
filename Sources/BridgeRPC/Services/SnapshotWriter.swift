import BridgeCore
import BridgeEngine

/// The engine's durable state (EDGE-CASES "App Killed During Processing"):
/// one document per session, rewritten only when that session changed, and
/// one `global` document (settings, app state, metrics, the backend link,
/// decisions queued offline), in the store's key-value area. What a turn
/// changed is written once, right before the turn's commit, so a burst of
/// 1000 tool uses of one session is one document write in one fsync.
final class SnapshotWriter {
    static let namespace = "engine"
    static let sessionPrefix = "session:"
    static let globalKey = "global"

    private let store: Store
    private unowned let host: EngineHost
    private let log: Logger
    private var dirty = Set<String>()
    private var globalDirty = false

    init(store: Store, host: EngineHost, log: Logger) {
        self.store = store
        self.host = host
        self.log = log
    }

    /// Pipeline step 1: marks what `event` changed.
    func record(_ event: EngineEvent, _ t: Engine.Transition) {
        if case .agent(let e) = event { dirty.insert(e.sessionId) }
        if case .approval(let r) = t.reply, let sid = r.sessionId { dirty.insert(sid) }
        if case .question(let r) = t.reply, let sid = r.sessionId { dirty.insert(sid) }
        for e in t.effects {
            if let sid = Self.session(of: e) { dirty.insert(sid) }
        }
        switch event {
        case .app, .settings, .connection, .approvalQueued: globalDirty = true
        default: if !t.effects.isEmpty { globalDirty = true }
        }
        if globalDirty || !dirty.isEmpty { store.requestTurnEnd() }
    }

    private static func session(of e: Effect) -> String? {
        switch e {
        case .approvalResolved(_, let sid, _, _, _), .questionAnswered(_, let sid, _, _), .sessionChanged(let sid):
            return sid
        case .postNotification(let n): return n.threadId
        case .showBanner(let b): return b.sessionId
        case .startActivity(let c), .updateActivity(let c), .endActivity(let c): return c.sessionId
        default: return nil
        }
    }

    /// Writes what changed since the last call (the store's `beforeCommit`).
    /// If a write fails the whole turn is rolled back (its replies become
    /// errors) and what it changed is written again at the next turn end.
    func write() {
        guard globalDirty || !dirty.isEmpty else { return }
        let sessions = dirty, global = globalDirty
        dirty.removeAll(keepingCapacity: true)
        globalDirty = false
        let now = host.now
        do {
            for sid in sessions {
                if let doc = host.engine.snapshot(session: sid) {
                    try store.put(.json(doc), namespace: Self.namespace, key: Self.sessionPrefix + sid, nowMs: now)
                }
            }
            if global {
                try store.put(.json(host.engine.snapshotGlobal()), namespace: Self.namespace, key: Self.globalKey, nowMs: now)
            }
        } catch {
            log.error("engine snapshot not written, the turn is rolled back: \(error)")
            store.abortTurn("the engine snapshot could not be written: \(error)")
        }
        // Only a commit that succeeded holds these documents.
        store.afterCommit { [weak self] err in
            guard let self, err != nil else { return }
            self.dirty.formUnion(sessions)
            self.globalDirty = self.globalDirty || global
        }
    }

    /// Deletes the documents of sessions the engine forgot.
    func forget(_ sessions: [String]) {
        do { for sid in sessions { try store.delete(namespace: Self.namespace, key: Self.sessionPrefix + sid) } } catch {
            log.error("finished sessions not deleted from the store: \(error)")
        }
    }
}
