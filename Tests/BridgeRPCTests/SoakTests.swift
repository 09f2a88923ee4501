import Testing
@testable import BridgeRPC
import BridgeCore
import CBridge
import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// A simulated week on the manual clock, through the real dispatch (in-process
/// client, in-memory store): each day 500 task runs over a pool of 250 session
/// ids (a user's projects recur), each with an approval (allowed, denied and
/// answered twice, timed out, cancelled by the agent), a queued message, and a
/// reconnect every 25 runs where deliveries in flight are never acked (the
/// phone lost them) and must come again. After every call the invariants are
/// checked; per simulated day the heap in use (glibc mallinfo2) is sampled.
///
/// Invariants: badge = pending approvals after every effect (the last
/// badge.update equals approval.list's count); no approval resolved twice
/// (approval.resolved once per request, a second answer is alreadyResolved or
/// expired); every queued message delivered and acked exactly once (a second
/// ack is refused, nothing left pending at the end).
@Suite("Soak: a simulated week", .serialized)
struct SoakTests {
    final class World {
        let env: ServerEnvironment
        let server: RPCServer
        let client: InProcessClient
        var nextID: Int64 = 100
        var badge: Int64? = nil
        // Preallocated (the test's own bookkeeping must not grow the heap it measures).
        var resolved: [UInt8]                 // per approval r-<n>: times resolved
        var resolvedCount = 0
        var delivered: [Int64] = []           // outbox.deliver ids not yet handled
        var ackedFlags: [Bool]                // by outbox id
        var sentFlags: [Bool]
        var ackedCount = 0, sentCount = 0
        var connected = false
        var calls = 0
        var failures: [String] = []

        init(capacity: Int) throws {
            resolved = [UInt8](repeating: 0, count: capacity)
            ackedFlags = [Bool](repeating: false, count: capacity + 16)
            sentFlags = [Bool](repeating: false, count: capacity + 16)
            delivered.reserveCapacity(1024)
            var options = ServerOptions()
            options.manualClock = true
            options.ephemeral = true
            options.logLevel = .error
            env = ServerEnvironment(loop: EventLoop(), options: options)
            server = try RPCServer(env: env)
            client = server.makeInProcessClient()
            _ = call("initialize", ["capabilities": [:]])
            _ = client.notify("initialized", [:])
            _ = call("app.update", ["phase": "background"])
        }

        func fail(_ s: String) { if failures.count < 20 { failures.append(s) } }

        /// One request; async replies (durable writes) come after the store's
        /// commit at the end of a loop turn.
        func call(_ method: String, _ params: JSON) -> JSON {
            let id = nextID
            nextID += 1
            calls += 1
            let msg: JSON = ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params]
            var out = client.messages(client.send(msg.serialized() + "\n"))
            var reply = take(&out, id)
            var turns = 0
            while reply == nil && turns < 5 {
                env.store?.flush()
                _ = env.loop.runOnce()
                out += client.messages(client.takeOutput())
                reply = take(&out, id)
                turns += 1
            }
            guard let reply else { fail("no reply to \(method)"); return .null }
            return reply
        }

        /// Handles notifications in `out`, returns the reply with `id`.
        func take(_ out: inout [JSON], _ id: Int64) -> JSON? {
            var reply: JSON?
            for m in out {
                if let method = m["method"]?.stringValue {
                    let p = m["params"] ?? .null
                    switch method {
                    case "badge.update": badge = p["count"]?.intValue
                    case "approval.resolved":
                        let rid = p["requestId"]?.stringValue ?? "?"
                        guard let n = Int(rid.dropFirst(2)), rid.hasPrefix("r-"), n < resolved.count else { fail("unexpected approval \(rid)"); break }
                        if resolved[n] == 0 { resolvedCount += 1 }
                        resolved[n] += 1
                        if resolved[n] > 1 { fail("approval \(rid) resolved twice") }
                    case "outbox.deliver":
                        if let mid = p["id"]?.intValue {
                            if isAcked(mid) { fail("message \(mid) delivered after its ack") }
                            delivered.append(mid)
                        }
                    default: break
                    }
                } else if m["id"]?.intValue == id {
                    reply = m
                }
            }
            out.removeAll()
            return reply
        }

        func result(_ method: String, _ params: JSON) -> JSON {
            let r = call(method, params)
            guard let res = r["result"] else { fail("\(method) failed: \(r.serialized())"); return .null }
            return res
        }

        /// badge = pending approvals, checked after every effect-producing call.
        func checkBadge(_ when: String) {
            let pending = Int64(result("approval.list", [:])["approvals"]?.arrayValue?.count ?? -1)
            if (badge ?? 0) != pending { fail("badge \(badge ?? -1) != \(pending) pending approvals after \(when)") }
        }

        func isAcked(_ mid: Int64) -> Bool { Int(mid) < ackedFlags.count && mid >= 0 && ackedFlags[Int(mid)] }
        func sent(_ mid: Int64) {
            guard mid >= 0, Int(mid) < sentFlags.count, !sentFlags[Int(mid)] else { return fail("message id \(mid) repeated or out of range") }
            sentFlags[Int(mid)] = true
            sentCount += 1
        }

        /// The phone acks what it received (while connected).
        func ackDelivered() {
            while !delivered.isEmpty {
                let mid = delivered.removeFirst()
                if isAcked(mid) { continue }   // a redelivery of one acked meanwhile cannot happen (checked above)
                let r = call("outbox.ack", ["id": .int(mid)])
                if r["result"] != nil, Int(mid) < ackedFlags.count { ackedFlags[Int(mid)] = true; ackedCount += 1 } else { fail("ack \(mid): \(r.serialized())") }
                // A second ack is refused: delivered exactly once.
                let again = call("outbox.ack", ["id": .int(mid)])
                if again["error"]?["code"]?.intValue != -32052 { fail("second ack of \(mid) not refused: \(again.serialized())") }
            }
        }
    }

    @Test("two simulated weeks: thousands of runs, invariants after every effect, heap flat once bounded memories are full")
    func week() throws {
        // Two weeks: the engine's bounded memories (4,096 recent approval
        // outcomes, 20 history entries per session) fill during the first;
        // the second must leave the heap where it was. Under a sanitizer one
        // week (the invariants; malloc is the sanitizer's, not measured).
        let runsPerDay = 500, pool = 250, days = sanitizer() == nil ? 14 : 7
        let w = try World(capacity: runsPerDay * days)
        let dayMs: Int64 = 86_400_000
        let stepMs = dayMs / Int64(runsPerDay)   // 172.8 s: longer than the 60 s approval timeout
        var heapPerDay: [Int] = []      // malloc'd bytes in use outside SQLite
        var sqlitePerDay: [Int] = []    // SQLite's own (the in-memory outbox and its history)
        var timedOut = 0, answeredTwice = 0
        _ = w.result("connection.update", ["state": "connected"])
        w.connected = true
        for day in 0..<days {
            for run in 0..<runsPerDay {
                let n = day * runsPerDay + run
                let sid = JSON.string("s-\(n % pool)")
                let rid = "r-\(n)"
                _ = w.result("agent.event", ["sessionId": sid, "type": "task_started", "projectName": .string("p\(n % pool)")])
                _ = w.result("agent.event", ["sessionId": sid, "type": "tool_use", "toolName": "Bash", "input": ["command": "npm test"]])
                _ = w.result("agent.event", ["sessionId": sid, "type": "approval_request", "requestId": .string(rid),
                                             "toolName": "Bash", "input": ["command": "rm -rf build"]])
                w.checkBadge("approval_request \(rid)")
                let sent = w.result("message.send", ["sessionId": sid, "text": .string("message \(n)")])
                if let mid = sent["id"]?.intValue { w.sent(mid) }
                switch n % 4 {
                case 0:
                    let r = w.result("approval.respond", ["requestId": .string(rid), "decision": "allow"])
                    if r["status"] != "accepted" { w.fail("allow \(rid): \(r.serialized())") }
                case 1:
                    let r = w.result("approval.respond", ["requestId": .string(rid), "decision": "deny", "deviceId": "phone"])
                    if r["status"] != "accepted" { w.fail("deny \(rid): \(r.serialized())") }
                    let again = w.result("approval.respond", ["requestId": .string(rid), "decision": "allow", "deviceId": "watch"])
                    if again["status"] != "alreadyResolved" { w.fail("second answer \(rid): \(again.serialized())") }
                    answeredTwice += 1
                case 2:
                    timedOut += 1   // the clock advance below passes its 60 s timeout
                default:
                    _ = w.result("agent.event", ["sessionId": sid, "type": "approval_cancelled", "requestId": .string(rid)])
                }
                w.checkBadge("decision \(rid)")
                if run % 25 == 24 {
                    // Reconnect: deliveries in flight are lost (never acked) and must come again.
                    w.delivered.removeAll()
                    _ = w.result("connection.update", ["state": "disconnected"])
                    _ = w.result("connection.update", ["state": "connected"])
                }
                if w.connected { w.ackDelivered() }
                _ = w.result("debug.advanceClock", ["ms": .int(stepMs)])
                w.checkBadge("clock advance")
                if n % 4 == 2 {
                    let late = w.result("approval.respond", ["requestId": .string(rid), "decision": "allow"])
                    if late["status"] != "expired" && late["status"] != "alreadyResolved" { w.fail("late answer \(rid): \(late.serialized())") }
                }
                _ = w.result("agent.event", ["sessionId": sid, "type": "task_completed", "summary": "done"])
                w.ackDelivered()
                if !w.failures.isEmpty { break }
            }
            if !w.failures.isEmpty { break }
            let sqlite = Int(sqlite3_memory_used())
            heapPerDay.append(Int(cb_heap_bytes_in_use()) - sqlite)
            sqlitePerDay.append(sqlite)
        }
        // Drain: everything sent is delivered and acked, nothing pending.
        for _ in 0..<20 where w.ackedCount < w.sentCount {
            _ = w.result("debug.advanceClock", ["ms": 60_000])
            w.ackDelivered()
        }
        #expect(w.failures.isEmpty, "\(w.failures)")
        #expect(w.ackedCount == w.sentCount && w.ackedFlags == w.sentFlags, "sent \(w.sentCount), acked \(w.ackedCount)")
        #expect(w.result("connection.update", ["state": "connected"])["pending"] == .int(0))
        #expect(w.resolvedCount == days * runsPerDay, "every approval resolved once: \(w.resolvedCount)")
        #expect(w.resolved.allSatisfy { $0 == 1 })
        #expect(w.badge == 0)
        #expect(timedOut > 0 && answeredTwice > 0)
        // Memory flat: the 4,096-entry memory of approval outcomes fills on day
        // 9 (500 approvals a day; its dictionary's last resize is there). From
        // the end of day 9 to day 14 (2,500 more runs) the heap outside SQLite
        // may not grow by more than 128 KiB: a leak of ~50 bytes per run fails.
        // (Measured: +62 KiB, ~25 bytes per run, allocator noise.) SQLite's share is the
        // in-memory database (--ephemeral): the outbox keeps delivered
        // messages as history, so it grows with the messages sent; it is
        // bounded here per message, and reported.
        let kib = { (a: [Int]) in a.enumerated().map { "d\($0.offset + 1) \($0.element / 1024)" }.joined(separator: ", ") }
        print("soak: \(days) days, \(w.calls) calls, \(w.sentCount) messages, \(w.resolvedCount) approvals, \(timedOut) timed out, " +
              "\(answeredTwice) answered twice; heap outside SQLite KiB: \(kib(heapPerDay)); SQLite KiB: \(kib(sqlitePerDay))")
        if sanitizer() == nil, heapPerDay.count == days {
            #expect(heapPerDay.last! - heapPerDay[8] < 128 << 10, "heap outside SQLite grew after day 9: \(kib(heapPerDay))")
            let perMessage = Double(sqlitePerDay.last! - sqlitePerDay[8]) / Double(runsPerDay * (days - 9))
            #expect(perMessage < 1024, "SQLite grew \(perMessage) bytes per message")
        }
    }

    /// Under ASan/UBSan (scripts/test-sanitizers.sh sets CB_SANITIZER) malloc
    /// is the sanitizer's and mallinfo2 does not see it.
    func sanitizer() -> String? { getenv("CB_SANITIZER").map { String(cString: $0) } }
}
