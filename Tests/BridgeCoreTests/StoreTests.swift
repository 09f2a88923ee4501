import Testing
import BridgeCore
import CUV
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under /tmp, removed at the end of the test.
final class StoreTempDir {
    let path: String
    init() {
        var template = Array("/tmp/cb-store-test-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }
    // Not system("rm -rf"): a fork while another test reopens its store makes the
    // child inherit that store's flock'd lock file until it execs, and the
    // reopen then sees its own pid holding the state directory.
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func sub(_ name: String) -> String { path + "/" + name }
}

func storeFileMode(_ path: String) -> mode_t? {
    var st = stat()
    return stat(path, &st) == 0 ? st.st_mode & 0o777 : nil
}

func storeReadFile(_ path: String) -> [UInt8]? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n <= 0 { break }
        out += buf[0..<n]
    }
    return out
}

func storeWriteFile(_ path: String, _ bytes: [UInt8]) {
    let f = fopen(path, "wb")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}

@Suite struct StoreTests {
    @Test func createsPrivateDirectoryAndFiles() throws {
        let tmp = StoreTempDir()
        let dir = tmp.sub("state/codingbridge")
        let store = try Store(directory: dir)
        _ = try store.enqueue(sessionId: "s", kind: "message", payload: ["text": "hi"], nowMs: 1)
        try store.commit()
        #expect(storeFileMode(dir) == 0o700)
        #expect(storeFileMode(tmp.sub("state")) == 0o700)
        #expect(storeFileMode(dir + "/codingbridge.db") == 0o600)
        #expect(storeFileMode(dir + "/codingbridge.db-wal") == 0o600)
        #expect(store.path == dir + "/codingbridge.db")
        #expect(store.schemaVersion == Store.supportedSchemaVersion)
    }

    @Test func defaultDirectoryFollowsXDG() {
        #expect(Store.defaultDirectory(environment: ["XDG_STATE_HOME": "/x/state", "HOME": "/home/u"]) == "/x/state/codingbridge")
        #expect(Store.defaultDirectory(environment: ["HOME": "/home/u"]) == "/home/u/.local/state/codingbridge")
        // The XDG spec says relative paths are invalid and must be ignored.
        #expect(Store.defaultDirectory(environment: ["XDG_STATE_HOME": "rel", "HOME": "/home/u"]) == "/home/u/.local/state/codingbridge")
    }

    @Test func committedMessagesSurviveReopenInOrder() throws {
        let tmp = StoreTempDir()
        var ids: [Int64] = []
        do {
            let store = try Store(directory: tmp.path)
            for i in 0..<5 {
                ids.append(try store.enqueue(sessionId: i % 2 == 0 ? "a" : "b", kind: "message",
                                             payload: ["text": .string("m\(i)"), "n": .int(Int64(i))], nowMs: 100).id)
            }
            try store.commit()
            #expect(store.commitCount == 1)
        }
        let store = try Store(directory: tmp.path)
        let all = try store.messages()
        #expect(all.map(\.id) == ids)
        #expect(all.map { $0.payload["text"]?.stringValue } == ["m0", "m1", "m2", "m3", "m4"])
        #expect(try store.messages(sessionId: "b").map { $0.payload["n"]?.intValue } == [1, 3])
        #expect(all.allSatisfy { $0.status == .queued && $0.attempts == 0 && $0.createdMs == 100 })
        #expect(ids == ids.sorted())
    }

    @Test func idempotencyKeyReturnsFirstIdWithoutDuplicate() throws {
        let tmp = StoreTempDir()
        var first: Int64 = 0
        do {
            let store = try Store(directory: tmp.path)
            let a = try store.enqueue(sessionId: "s", kind: "message", payload: ["text": "x"], idempotencyKey: "k1", nowMs: 1)
            // Same turn, not yet committed: still found.
            let b = try store.enqueue(sessionId: "s", kind: "message", payload: ["text": "x"], idempotencyKey: "k1", nowMs: 2)
            #expect(!a.existed && b.existed && a.id == b.id)
            first = a.id
            try store.commit()
        }
        let store = try Store(directory: tmp.path)
        let c = try store.enqueue(sessionId: "s", kind: "message", payload: ["text": "x"], idempotencyKey: "k1", nowMs: 3)
        #expect(c.existed && c.id == first)
        // After delivery the key still protects against a late retry.
        try store.ack(id: first, nowMs: 4)
        let d = try store.enqueue(sessionId: "s", kind: "message", payload: ["text": "x"], idempotencyKey: "k1", nowMs: 5)
        #expect(d.existed && d.id == first)
        let e = try store.enqueue(sessionId: "s", kind: "message", payload: ["text": "x"], idempotencyKey: "k2", nowMs: 5)
        #expect(!e.existed && e.id != first)
        #expect(try store.count(statuses: Set(OutboxStatus.allCases)) == 2)
        #expect(try store.message(id: first)?.idempotencyKey == "k1")
    }

    @Test func deliveryIsFIFOPerSessionWithAckAndFail() throws {
        let store = try Store(directory: nil)
        let a1 = try store.enqueue(sessionId: "a", kind: "message", payload: "a1", nowMs: 0).id
        let a2 = try store.enqueue(sessionId: "a", kind: "message", payload: "a2", nowMs: 0).id
        let b1 = try store.enqueue(sessionId: "b", kind: "message", payload: "b1", nowMs: 0).id
        // One head per session.
        let due = try store.takeDue(nowMs: 10, ackDeadlineMs: 1010)
        #expect(Set(due.map(\.id)) == [a1, b1])
        #expect(due.allSatisfy { $0.status == .inflight && $0.attempts == 1 && $0.nextAttemptMs == 1010 })
        // Nothing more until an ack: a2 waits behind a1.
        #expect(try store.takeDue(nowMs: 20, ackDeadlineMs: 1020).isEmpty)
        try store.ack(id: a1, nowMs: 30)
        #expect(try store.takeDue(nowMs: 30, ackDeadlineMs: 1030).map(\.id) == [a2])
        // A failed attempt goes back to the queue at the retry time.
        try store.fail(id: b1, error: "socket closed", retryAtMs: 500, nowMs: 300)
        let b = try #require(try store.message(id: b1))
        #expect(b.status == .queued && b.nextAttemptMs == 500 && b.lastError == "socket closed" && b.attempts == 1)
        #expect(try store.takeDue(nowMs: 499, ackDeadlineMs: 2000).isEmpty)
        #expect(try store.takeDue(nowMs: 500, ackDeadlineMs: 2000).map { [$0.id, Int64($0.attempts)] } == [[b1, 2]])
        // Out of retries: failed, and the session's next message can go.
        try store.fail(id: b1, error: "gave up", retryAtMs: nil, nowMs: 600)
        #expect(try store.message(id: b1)?.status == .failed)
        #expect(try store.messages(statuses: [.failed]).map(\.id) == [b1])
        try store.ack(id: a2, nowMs: 40)
        #expect(try store.count() == 0)
        #expect(try store.count(statuses: [.delivered]) == 2)
    }

    @Test func ackAndFailExplainUnknownAndFinishedIds() throws {
        let store = try Store(directory: nil)
        let id = try store.enqueue(sessionId: "s", kind: "message", payload: "x", nowMs: 0).id
        #expect(throws: StoreError.self) { try store.ack(id: 999, nowMs: 1) }
        do { try store.ack(id: 999, nowMs: 1) } catch let e as StoreError {
            #expect(e.kind == .notFound)
            #expect(e.message.contains("999"))
        }
        try store.ack(id: id, nowMs: 1)
        do {
            try store.ack(id: id, nowMs: 2)
            Issue.record("second ack should fail")
        } catch let e as StoreError {
            #expect(e.kind == .invalidState)
            #expect(e.message.contains("already delivered"))
        }
        do {
            try store.fail(id: id, error: "x", retryAtMs: 5, nowMs: 4)
            Issue.record("fail after ack should fail")
        } catch let e as StoreError { #expect(e.kind == .invalidState) }
        #expect(try store.message(id: 12345) == nil)
    }

    @Test func expiryAndOverdueAcks() throws {
        let store = try Store(directory: nil)
        let old = try store.enqueue(sessionId: "s", kind: "message", payload: "old", nowMs: 0, expiresMs: 100).id
        let next = try store.enqueue(sessionId: "s", kind: "message", payload: "next", nowMs: 0).id
        #expect(try store.nextDueMs() == 0)
        // At 150 the head expired: reported as expired, and the next one goes out in the same pass.
        let due = try store.takeDue(nowMs: 150, ackDeadlineMs: 300)
        #expect(due.map { "\($0.id):\($0.status)" } == ["\(old):expired", "\(next):inflight"])
        #expect(try store.message(id: old)?.status == .expired)
        #expect(try store.nextDueMs() == 300)
        // No ack by the deadline: handed back unchanged for the caller to fail.
        let overdue = try store.takeDue(nowMs: 300, ackDeadlineMs: 600)
        #expect(overdue.map(\.id) == [next] && overdue[0].status == .inflight && overdue[0].attempts == 1)
        #expect(try store.requeueInflight(nowMs: 310) == 1)
        #expect(try store.message(id: next)?.status == .queued)
        #expect(try store.nextDueMs() == 310)
        try store.ack(id: next, nowMs: 320)
        #expect(try store.nextDueMs() == nil)
    }

    @Test func draftsPerSession() throws {
        let tmp = StoreTempDir()
        do {
            let store = try Store(directory: tmp.path)
            #expect(try store.draft(sessionId: "a") == nil)
            try store.saveDraft(sessionId: "a", text: "first", nowMs: 10)
            try store.saveDraft(sessionId: "a", text: "héllo 👋 with\u{0}nul", nowMs: 20)
            try store.saveDraft(sessionId: "b", text: "", nowMs: 30)
            try store.commit()
        }
        let store = try Store(directory: tmp.path)
        let a = try #require(try store.draft(sessionId: "a"))
        #expect(a.text == "héllo 👋 with\u{0}nul" && a.savedMs == 20)
        #expect(try store.draft(sessionId: "b")?.text == "")
        #expect(try store.clearDraft(sessionId: "a"))
        #expect(try !store.clearDraft(sessionId: "a"))
        #expect(try store.draft(sessionId: "a") == nil)
    }

    @Test func keyValueAreaHoldsJSONAndBytes() throws {
        let store = try Store(directory: nil)
        #expect(store.path == "")
        let snapshot: JSON = ["id": "s1", "status": "processing", "todos": [1, 2, 3], "nested": ["ok": true]]
        try store.put(.json(snapshot), namespace: "sessions", key: "s1", nowMs: 1)
        try store.put(.bytes([0, 1, 2, 255]), namespace: "blobs", key: "b", nowMs: 1)
        try store.put(.json(["status": "idle"]), namespace: "sessions", key: "s0", nowMs: 2)
        #expect(try store.value(namespace: "sessions", key: "s1") == .json(snapshot))
        #expect(try store.value(namespace: "blobs", key: "b") == .bytes([0, 1, 2, 255]))
        #expect(try store.value(namespace: "blobs", key: "s1") == nil)
        #expect(try store.entries(namespace: "sessions").map(\.key) == ["s0", "s1"])
        try store.put(.json("replaced"), namespace: "sessions", key: "s1", nowMs: 3)
        #expect(try store.value(namespace: "sessions", key: "s1") == .json("replaced"))
        #expect(try store.delete(namespace: "sessions", key: "s1"))
        #expect(try !store.delete(namespace: "sessions", key: "s1"))
        #expect(try store.entries(namespace: "sessions").count == 1)
    }

    @Test func loopTurnCommitsOnceThenRunsCallbacks() throws {
        let loop = EventLoop()
        let tmp = StoreTempDir()
        let store = try Store(directory: tmp.path)
        try store.attach(to: loop)
        var results: [StoreError?] = []
        var committedBeforeCallback = true
        store.onWakeup = {
            for i in 0..<200 {
                _ = try! store.enqueue(sessionId: "s", kind: "message", payload: .int(Int64(i)), nowMs: 1)
                store.afterCommit { err in
                    results.append(err)
                    if store.hasPendingWrites { committedBeforeCallback = false }
                }
            }
        }
        let before = store.commitCount
        store.scheduleWakeup(inMs: 0)
        // The store's handles never keep a loop alive on their own (the
        // server's stdin does); a referenced timer stands in for it here.
        let keepAlive = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        uv_timer_init(loop.uv, keepAlive)
        uv_timer_start(keepAlive, { _ in }, 1, 1)
        for _ in 0..<50 where results.count < 200 { loop.runOnce(); usleep(1000) }
        uv_close(UnsafeMutableRawPointer(keepAlive).assumingMemoryBound(to: uv_handle_t.self), nil)
        loop.runOnce()
        keepAlive.deallocate()
        #expect(results.count == 200)
        #expect(results.allSatisfy { $0 == nil })
        #expect(committedBeforeCallback)
        // The whole burst of 200 writes cost one commit (one fsync).
        #expect(store.commitCount == before + 1)
        #expect(try store.count() == 200)
        store.onWakeup = nil  // the closure captures the store: break the cycle (LeakSanitizer)
    }
}
