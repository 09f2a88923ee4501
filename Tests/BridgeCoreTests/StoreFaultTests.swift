import Testing
import Foundation
import BridgeCore
import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// Runs raw SQL on a database file, bypassing the store (to forge foreign and
/// newer-schema files).
private func rawSQL(_ path: String, _ sql: String) throws {
    var db: OpaquePointer?
    struct OpenFailed: Error {}
    guard sqlite3_open(path, &db) == SQLITE_OK else { throw OpenFailed() }
    defer { sqlite3_close(db) }
    var err: UnsafeMutablePointer<CChar>?
    let rc = sqlite3_exec(db, sql, nil, nil, &err)
    #expect(rc == SQLITE_OK, "\(err.map { String(cString: $0) } ?? "")")
}

/// Tests run as root here, and root ignores permission bits, so read-only and
/// full disks are made for real: tmpfs mounts (read-only, or a few pages big).
private func storeMount(_ dir: String, options: String, flags: UInt = 0) -> Bool {
    mount("tmpfs", dir, "tmpfs", flags, options) == 0
}

private let canMount: Bool = {
    let tmp = StoreTempDir()
    let ok = storeMount(tmp.path, options: "size=64k")
    if ok { umount2(tmp.path, Int32(MNT_DETACH)) }
    return ok
}()

private func expectStoreError(_ kind: StoreError.Kind, containing parts: [String] = [],
                              _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        try body()
        Issue.record("expected StoreError.\(kind)", sourceLocation: sourceLocation)
    } catch let e as StoreError {
        #expect(e.kind == kind, "\(e.message)", sourceLocation: sourceLocation)
        for p in parts { #expect(e.message.contains(p), "'\(e.message)' should mention '\(p)'", sourceLocation: sourceLocation) }
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
    }
}

@Suite(.serialized) struct StoreFaultTests {
    @Test func secondOpenerOfTheDirectoryIsRefusedNamingThePid() throws {
        let tmp = StoreTempDir()
        var first: Store? = try Store(directory: tmp.path)
        _ = try first!.enqueue(sessionId: "s", kind: "message", payload: "x", nowMs: 1)
        expectStoreError(.locked, containing: ["in use by another codingbridge process", "pid \(getpid())", tmp.path]) {
            _ = try Store(directory: tmp.path)
        }
        first = nil // releases the lock (and commits)
        let second = try Store(directory: tmp.path)
        #expect(try second.count() == 1)
    }

    @Test func garbageFileIsRefusedAndLeftUntouched() throws {
        let tmp = StoreTempDir()
        let db = tmp.sub("codingbridge.db")
        let garbage = Array("this is not a database, it is my shopping list\n".utf8) + [UInt8](repeating: 0xAB, count: 5000)
        storeWriteFile(db, garbage)
        expectStoreError(.notADatabase, containing: [db, "left untouched"]) { _ = try Store(directory: tmp.path) }
        #expect(storeReadFile(db) == garbage)
    }

    @Test func foreignSQLiteDatabaseIsRefusedAndLeftUntouched() throws {
        let tmp = StoreTempDir()
        let db = tmp.sub("codingbridge.db")
        try rawSQL(db, "CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO photos(name) VALUES('cat')")
        let before = storeReadFile(db)
        expectStoreError(.foreign, containing: ["not a CodingBridge store", "left untouched"]) { _ = try Store(directory: tmp.path) }
        #expect(storeReadFile(db) == before)
    }

    @Test func newerSchemaIsRefusedAndLeftUntouched() throws {
        let tmp = StoreTempDir()
        let db = tmp.sub("codingbridge.db")
        do {
            let store = try Store(directory: tmp.path)
            _ = try store.enqueue(sessionId: "s", kind: "message", payload: "keep me", nowMs: 1)
        }
        try rawSQL(db, "PRAGMA user_version=99")
        let before = storeReadFile(db)
        expectStoreError(.newerSchema, containing: ["version 99", "supports (\(Store.supportedSchemaVersion))", "Upgrade"]) {
            _ = try Store(directory: tmp.path)
        }
        #expect(storeReadFile(db) == before)
        // Back to our version: the data is all still there.
        try rawSQL(db, "PRAGMA user_version=\(Store.supportedSchemaVersion)")
        #expect(try Store(directory: tmp.path).messages().map(\.payload) == ["keep me"])
    }

    /// A database written by schema 1 (no finish time) opens, migrates
    /// forward in place and keeps its messages; a delivered one finished at
    /// its ack time.
    @Test func schemaOneMigratesForward() throws {
        let tmp = StoreTempDir()
        let db = tmp.sub("codingbridge.db")
        do {
            let store = try Store(directory: tmp.path)
            let sent = try store.enqueue(sessionId: "s", kind: "message", payload: "sent", nowMs: 1).id
            _ = try store.enqueue(sessionId: "t", kind: "message", payload: "from v1", nowMs: 2)
            try store.ack(id: sent, nowMs: 5_000)
            try store.commit()
        }
        try rawSQL(db, "DROP TABLE devices; DROP TABLE audit; DROP INDEX outbox_finished; "
                       + "ALTER TABLE outbox DROP COLUMN finished_ms; PRAGMA user_version=1")
        let store = try Store(directory: tmp.path)
        #expect(store.schemaVersion == Store.supportedSchemaVersion)
        #expect(try store.messages().map(\.payload) == ["from v1"])
        #expect(try store.pruneFinished(beforeMs: 4_999) == 0)
        #expect(try store.pruneFinished(beforeMs: 5_001) == 1)
    }

    /// Messages that finished before the cut-off go, in slices; unfinished ones
    /// (however old) and ones that finished later (however old) stay; a
    /// pruned key is free again.
    @Test func pruneDeletesOnlyMessagesFinishedLongAgo() throws {
        let tmp = StoreTempDir()
        let store = try Store(directory: tmp.path)
        var ids: [Int64] = []
        for i in 0..<6 {
            ids.append(try store.enqueue(sessionId: "s\(i)", kind: "message", payload: .string("m\(i)"),
                                         idempotencyKey: "k\(i)", nowMs: Int64(100 + i)).id)
        }
        try store.ack(id: ids[0], nowMs: 200)
        try store.ack(id: ids[1], nowMs: 200)
        try store.fail(id: ids[2], error: "gave up", retryAtMs: nil, nowMs: 300)
        try store.ack(id: ids[5], nowMs: 9_000) // queued long ago, delivered late: kept
        // ids[3], ids[4]: still queued, both old: never pruned.
        try store.commit()
        #expect(try store.pruneFinished(beforeMs: 5_000, limit: 2) == 2)
        #expect(try store.pruneFinished(beforeMs: 5_000, limit: 2) == 1)
        #expect(try store.pruneFinished(beforeMs: 5_000) == 0)
        try store.commit()
        let left = try store.messages(statuses: Set(OutboxStatus.allCases)).map(\.id)
        #expect(left == [ids[3], ids[4], ids[5]])
        // The key of a pruned message can be used again.
        #expect(try store.enqueue(sessionId: "s0", kind: "message", payload: "again", idempotencyKey: "k0", nowMs: 20_000).existed == false)
    }

    @Test func damagedPagesAreReportedNotDeleted() throws {
        let tmp = StoreTempDir()
        let db = tmp.sub("codingbridge.db")
        do {
            let store = try Store(directory: tmp.path)
            for i in 0..<3000 {
                _ = try store.enqueue(sessionId: "s\(i % 7)", kind: "message",
                                      payload: .string(String(repeating: "p", count: 200)), nowMs: 1)
            }
        } // close checkpoints the WAL into the main file
        var bytes = try #require(storeReadFile(db))
        #expect(bytes.count > 40_000)
        for i in 8192..<(bytes.count - 4096) { bytes[i] = 0xFF }
        storeWriteFile(db, bytes)
        do {
            let store = try Store(directory: tmp.path)
            _ = try store.messages()
            _ = try store.enqueue(sessionId: "s0", kind: "message", payload: "x", nowMs: 2)
            try store.commit()
            Issue.record("reading a damaged database should fail")
        } catch let e as StoreError {
            #expect([.corrupt, .notADatabase].contains(e.kind), "\(e)")
            #expect(e.message.contains("damaged") || e.message.contains("not a readable"), "\(e)")
        }
        #expect(storeReadFile(db)?.count == bytes.count)
    }

    @Test func unusableDirectoryIsAClearError() throws {
        let tmp = StoreTempDir()
        storeWriteFile(tmp.sub("file"), [1])
        expectStoreError(.directory, containing: ["cannot create state directory", "file/state"]) {
            _ = try Store(directory: tmp.sub("file/state"))
        }
        expectStoreError(.directory, containing: ["empty"]) { _ = try Store(directory: "") }
    }

    @Test func deletedStateDirectoryFailsWritesInsteadOfLosingThem() throws {
        let tmp = StoreTempDir()
        let dir = tmp.sub("state")
        let store = try Store(directory: dir)
        _ = try store.enqueue(sessionId: "s", kind: "message", payload: "before", nowMs: 1)
        try store.commit()
        try FileManager.default.removeItem(atPath: dir)
        _ = try store.enqueue(sessionId: "s", kind: "message", payload: "after", nowMs: 2)
        expectStoreError(.directory, containing: ["deleted or moved", dir]) { try store.commit() }
    }

    @Test func sizeLimitFailsTheWholeTurnAndKeepsCommittedData() throws {
        let tmp = StoreTempDir()
        let store = try Store(directory: tmp.path)
        let kept = try store.enqueue(sessionId: "s", kind: "message", payload: "committed", nowMs: 1).id
        try store.commit()
        try store.limitGrowth(pages: 3)
        var thrown: StoreError?
        var written = 0
        for i in 0..<10_000 {
            do {
                _ = try store.enqueue(sessionId: "s", kind: "message", payload: .string(String(repeating: "x", count: 300) + "\(i)"), nowMs: 2)
                written += 1
            } catch let e as StoreError { thrown = e; break }
        }
        let e = try #require(thrown)
        #expect(e.kind == .diskFull && e.message.contains("full"), "\(e)")
        #expect(written > 0)
        // SQLite rolled the turn back: later writes of the turn are refused and
        // the commit reports the failure, so no reply can claim success.
        expectStoreError(.aborted, containing: ["rolled back"]) {
            _ = try store.enqueue(sessionId: "s", kind: "message", payload: "late", nowMs: 3)
        }
        expectStoreError(.diskFull) { try store.commit() }
        // Nothing of the failed turn is visible; the committed message is.
        #expect(try store.messages().map(\.id) == [kept])
        // The next turn works again once there is room (small writes fit).
        try store.limitGrowth(pages: 1000)
        _ = try store.enqueue(sessionId: "s", kind: "message", payload: "after", nowMs: 4)
        try store.commit()
        #expect(try store.count() == 2)
    }

    @Test(.enabled(if: canMount, "needs permission to mount tmpfs"))
    func readOnlyFileSystemIsAClearStartupError() throws {
        let tmp = StoreTempDir()
        let mnt = tmp.sub("ro")
        mkdir(mnt, 0o755)
        #expect(storeMount(mnt, options: "size=1m"))
        defer { umount2(mnt, Int32(MNT_DETACH)) }
        do {
            let store = try Store(directory: mnt + "/state")
            _ = try store.enqueue(sessionId: "s", kind: "message", payload: "before ro", nowMs: 1)
        }
        #expect(mount("tmpfs", mnt, "tmpfs", UInt(MS_REMOUNT | MS_RDONLY), "size=1m") == 0)
        expectStoreError(.readOnly, containing: ["not writable", mnt + "/state"]) { _ = try Store(directory: mnt + "/state") }
        expectStoreError(.readOnly, containing: ["cannot create state directory", "Read-only"]) {
            _ = try Store(directory: mnt + "/other")
        }
        // The data is intact once the file system is writable again.
        #expect(mount("tmpfs", mnt, "tmpfs", UInt(MS_REMOUNT), "size=1m") == 0)
        #expect(try Store(directory: mnt + "/state").messages().map(\.payload) == ["before ro"])
    }

    @Test(.enabled(if: canMount, "needs permission to mount tmpfs"))
    func fullDiskIsAClearErrorAndCommittedDataSurvives() throws {
        let tmp = StoreTempDir()
        let mnt = tmp.sub("full")
        mkdir(mnt, 0o755)
        #expect(storeMount(mnt, options: "size=256k"))
        defer { umount2(mnt, Int32(MNT_DETACH)) }
        var committed: [Int64] = []
        var failure: StoreError?
        do {
            let store = try Store(directory: mnt)
            outer: for turn in 0..<1000 {
                var turnIds: [Int64] = []
                do {
                    for i in 0..<5 {
                        turnIds.append(try store.enqueue(sessionId: "s", kind: "message",
                                                         payload: .string(String(repeating: "z", count: 2000) + "\(turn).\(i)"), nowMs: 1).id)
                    }
                    try store.commit()
                    committed += turnIds
                } catch let e as StoreError {
                    failure = e
                    try? store.commit() // clears the failed turn
                    break outer
                }
            }
        }
        let e = try #require(failure)
        #expect(e.kind == .diskFull, "\(e)")
        #expect(e.message.contains("full"), "\(e)")
        #expect(committed.count >= 5)
        // Grow the file system: every committed message is there, nothing else.
        #expect(mount("tmpfs", mnt, "tmpfs", UInt(MS_REMOUNT), "size=8m") == 0)
        let store = try Store(directory: mnt)
        #expect(try store.messages().map(\.id) == committed)
    }
}
