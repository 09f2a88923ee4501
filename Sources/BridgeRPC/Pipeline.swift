import BridgeCore
import BridgeEngine

extension ServerEnvironment {
    /// The one step after every engine `apply`, in this order:
    ///
    ///     transition -> audit -> durable snapshot -> outbox -> router + push -> waiting replies
    ///
    /// 1. The sessions and global state it changed are marked for the
    ///    snapshot, written right before this turn's commit.
    /// 2. Decisions queued offline whose request ended meanwhile fail in the
    ///    outbox (nothing is sent for them).
    /// 3. Each effect becomes a notification for the connections the router
    ///    picks (held for the first client after a restart), and a push
    ///    for each registered device that is away (`PushService`).
    /// 4. Hook requests waiting on a resolved approval get their answer.
    /// Before all of them, decisions and answers go to the audit log (with
    /// the caller's device, connection kind and address).
    /// Replies from 4 and from every handler leave through `barrier`, after
    /// the commit that holds what they report (and its audit entries).
    func afterApply(_ event: EngineEvent, _ t: Engine.Transition) {
        audit?.recordDecisions(event, t, caller: caller)
        snapshots?.record(event, t)
        decisions?.settle(event, engine: engine.engine, now: engine.now)
        if !t.effects.isEmpty {
            let now = engine.now
            for e in t.effects { router.send(e.method, engine.payload(e, now: now), to: .all) }
            push?.route(t.effects) { engine.payload($0, now: now) }
        }
        waiters.resolve(t.effects)
    }
}

/// Holds every reply until the store has committed what was written before
/// it (a reply never claims state a crash could lose), and releases replies
/// in the order they were given. With nothing waiting to commit a reply goes
/// out at once. If the commit fails, what it held was rolled back: a result
/// becomes a -32050 error instead.
final class ReplyBarrier {
    weak var store: Store?

    /// Runs `send` once everything written so far is durable, with the
    /// commit's error if it failed.
    func release(_ send: @escaping (StoreError?) -> Void) {
        guard let store, store.hasPendingTurn else { return send(nil) }
        store.afterCommit(send)
    }

    /// Answers `responder` behind the barrier (with nothing to wait for,
    /// at once and without allocating a continuation). `reportsStoredState`
    /// false (lifecycle answers): a failed commit leaves the result as it is.
    func answer<T: ReplyTarget>(_ responder: T?, _ outcome: Result<JSON, RPCError>, reportsStoredState: Bool = true) {
        guard let responder else { return }
        guard let store, store.hasPendingTurn else { return Self.send(responder, outcome, nil) }
        store.afterCommit { err in Self.send(responder, outcome, reportsStoredState ? err : nil) }
    }

    private static func send<T: ReplyTarget>(_ responder: T, _ outcome: Result<JSON, RPCError>, _ err: StoreError?) {
        switch (outcome, err) {
        case (.success, let err?): responder.error(StoreRPCError.from(err))
        case (.success(let r), nil): responder.result(r)
        case (.failure(let e), _): responder.error(e)
        }
    }
}

/// Where a reply goes: a JSON-RPC request's responder, or an http hook's
/// HTTP response (`HookHTTP.swift`); both leave through the same barrier.
protocol ReplyTarget: AnyObject {
    func result(_ value: JSON)
    func error(_ e: RPCError)
}

extension RPCResponder: ReplyTarget {
    func error(_ e: RPCError) { error(code: e.code, message: e.message, data: e.data) }
}
