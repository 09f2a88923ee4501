import Testing
@testable import BridgeRPC
import BridgeCore
import CBridge
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
        var resolved: [String: Int] = [:]
        var delivered: [Int64] = []          // outbox.deliver ids not yet handled
        var acked: Set<Int64> = []
        var sent: Set<Int64> = []
        var connected = false
        var calls = 0
        var failures: [String] = []

        init() throws {
            var options = ServerOptions()
            options.manualClock = true
            options.ephemeral = true
            options.logLevel = .error
            Log.level = .error
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
                        resolved[rid, default: 0] += 1
                        if resolved[rid]! > 1 { fail("approval \(rid) resolved twice") }
                    case "outbox.deliver":
                        if let mid = p["id"]?.intValue {
                            if acked.contains(mid) { fail("message \(mid) delivered after its ack") }
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

        /// The phone acks what it received (while connected).
        func ackDelivered() {
            while !delivered.isEmpty {
                let mid = delivered.removeFirst()
                if acked.contains(mid) { continue }   // a redelivery of one acked meanwhile cannot happen (checked above)
                let r = call("outbox.ack", ["id": .int(mid)])
                if r["result"] != nil { acked.insert(mid) } else { fail("ack \(mid): \(r.serialized())") }
                // A second ack is refused: delivered exactly once.
                let again = call("outbox.ack", ["id": .int(mid)])
                if again["error"]?["code"]?.intValue != -32052 { fail("second ack of \(mid) not refused: \(again.serialized())") }
            }
        }
    }

    @Test("a week: thousands of runs, invariants after every effect, heap flat per day")
    func week() throws {
        let w = try World()
        let runsPerDay = 500, pool = 250, days = 7
        let dayMs: Int64 = 86_400_000
        let stepMs = dayMs / Int64(runsPerDay)   // 172.8 s: longer than the 60 s approval timeout
        var heapPerDay: [Int] = []
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
                if let mid = sent["id"]?.intValue { w.sent.insert(mid) }
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
            heapPerDay.append(Int(cb_heap_bytes_in_use()))
        }
        // Drain: everything sent is delivered and acked, nothing pending.
        for _ in 0..<20 where w.acked.count < w.sent.count {
            _ = w.result("debug.advanceClock", ["ms": 60_000])
            w.ackDelivered()
        }
        #expect(w.failures.isEmpty, "\(w.failures)")
        #expect(w.acked == w.sent, "sent \(w.sent.count), acked \(w.acked.count)")
        #expect(w.result("connection.update", ["state": "connected"])["pending"] == .int(0))
        #expect(w.resolved.count == days * runsPerDay, "every approval resolved once: \(w.resolved.count)")
        #expect(w.resolved.values.allSatisfy { $0 == 1 })
        #expect(w.badge == 0)
        #expect(timedOut > 0 && answeredTwice > 0)
        // Memory flat: after day 1 (warm-up: the session pool, caches, SQLite
        // page cache) the heap may not grow by more than 1 MiB over six days,
        // while 3,000 more runs went through.
        let line = heapPerDay.enumerated().map { "day \($0.offset + 1): \($0.element / 1024) KiB" }.joined(separator: ", ")
        print("soak: \(w.calls) calls, \(w.sent.count) messages, \(w.resolved.count) approvals; heap in use \(line)")
        if sanitizer() == nil, heapPerDay.count == days {
            #expect(heapPerDay.last! - heapPerDay[0] < 1 << 20, "heap grew: \(line)")
        }
    }

    /// Under ASan/UBSan (scripts/test-sanitizers.sh sets CB_SANITIZER) malloc
    /// is the sanitizer's and mallinfo2 does not see it.
    func sanitizer() -> String? { getenv("CB_SANITIZER").map { String(cString: $0) } }
}
