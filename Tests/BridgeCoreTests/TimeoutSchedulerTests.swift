import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import BridgeCore

@Suite("Timeout scheduler")
struct TimeoutSchedulerTests {
    @Test("deadline order, FIFO ties, never early")
    func order() throws {
        let s = TimeoutScheduler()
        var log: [String] = []
        s.schedule(afterMs: 30) { log.append("c30") }
        s.schedule(afterMs: 10) { log.append("a10") }
        s.schedule(afterMs: 20) { log.append("b20-1") }
        s.schedule(afterMs: 20) { log.append("b20-2") }
        s.schedule(afterMs: 20) { log.append("b20-3") }
        #expect(try s.advance(byMs: 9) == 0)
        #expect(log.isEmpty)
        #expect(try s.advance(byMs: 1) == 1)
        #expect(log == ["a10"])
        #expect(try s.advance(byMs: 19) == 3)
        #expect(log == ["a10", "b20-1", "b20-2", "b20-3"])
        #expect(s.nowMs == 29)
        #expect(try s.advance(byMs: 1) == 1)
        #expect(log.last == "c30")
        #expect(s.pendingCount == 0)
    }

    @Test("the clock reads each timeout's deadline while it runs")
    func clockInCallback() throws {
        let s = TimeoutScheduler()
        var seen: [UInt64] = []
        for d: UInt64 in [5, 17, 400] { s.schedule(afterMs: d) { seen.append(s.nowMs) } }
        try s.advance(byMs: 1000)
        #expect(seen == [5, 17, 400])
        #expect(s.nowMs == 1000)
    }

    @Test("cancel from inside a callback: others due in the same pass, and itself")
    func cancelInCallback() throws {
        let s = TimeoutScheduler()
        var log: [String] = []
        var b: TimeoutScheduler.Handle?
        var selfHandle: TimeoutScheduler.Handle?
        selfHandle = s.schedule(afterMs: 10) {
            log.append("a")
            #expect(s.cancel(b!))          // due in this same advance
            #expect(!s.cancel(b!))         // twice is harmless
            #expect(!s.cancel(selfHandle!)) // itself: already dead
            #expect(!s.reschedule(selfHandle!, afterMs: 5))
        }
        b = s.schedule(afterMs: 10) { log.append("b") }
        s.schedule(afterMs: 10) { log.append("c") }
        #expect(try s.advance(byMs: 10) == 2)
        #expect(log == ["a", "c"])
    }

    @Test("timeouts scheduled by callbacks inside the window fire in the same advance")
    func nestedSchedule() throws {
        let s = TimeoutScheduler()
        var log: [(String, UInt64)] = []
        s.schedule(afterMs: 100) {
            log.append(("outer", s.nowMs))
            s.schedule(afterMs: 50) { log.append(("inner", s.nowMs)) }
            s.schedule(afterMs: 0) { log.append(("zero", s.nowMs)) }
            s.schedule(afterMs: 500) { [unowned s] in log.append(("late", s.nowMs)) }  // still pending at the end: no cycle
        }
        s.schedule(afterMs: 120) { log.append(("mid", s.nowMs)) }
        #expect(try s.advance(byMs: 200) == 4)
        #expect(log.map(\.0) == ["outer", "zero", "mid", "inner"])
        #expect(log.map(\.1) == [100, 100, 120, 150])
        #expect(s.pendingCount == 1)
        #expect(s.nextDeadlineMs == 600)
    }

    @Test("reschedule later and earlier keeps the handle and the body")
    func reschedule() throws {
        let s = TimeoutScheduler()
        var log: [String] = []
        let a = s.schedule(afterMs: 10) { log.append("a") }
        let b = s.schedule(afterMs: 20) { log.append("b") }
        #expect(s.reschedule(a, afterMs: 30))
        #expect(s.deadline(of: a) == 30)
        try s.advance(byMs: 25)
        #expect(log == ["b"])
        #expect(s.reschedule(a, atMs: 26))
        try s.advance(byMs: 1)
        #expect(log == ["b", "a"])
        #expect(!s.reschedule(a, afterMs: 1))
        #expect(!s.isPending(b))
        // Rescheduling onto an existing deadline queues behind it.
        var order: [Int] = []
        let x = s.schedule(afterMs: 5) { order.append(1) }
        s.schedule(afterMs: 10) { order.append(2) }
        #expect(s.reschedule(x, afterMs: 10))
        try s.advance(byMs: 10)
        #expect(order == [2, 1])
    }

    @Test("stale and foreign handles are harmless")
    func staleHandles() throws {
        let s = TimeoutScheduler()
        var fired = 0
        let a = s.schedule(afterMs: 1) { fired += 1 }
        #expect(s.cancel(a))
        // The slot is reused with a new generation: the old handle stays dead.
        let b = s.schedule(afterMs: 1) { fired += 10 }
        #expect(a != b)
        #expect(!s.cancel(a))
        #expect(s.deadline(of: a) == nil)
        #expect(!s.cancel(TimeoutScheduler.Handle(rawValue: 0)))
        #expect(!s.cancel(TimeoutScheduler.Handle(rawValue: 0xFFFF_FFFF_FFFF_FFFF)))
        #expect(!s.cancel(TimeoutScheduler.Handle(rawValue: (2 << 32) | 0))) // even generation: a free slot
        try s.advance(byMs: 1)
        #expect(fired == 10)
        #expect(!s.cancel(b))
    }

    @Test("one hour crossed instantly; a periodic minute tick never drifts")
    func oneHour() throws {
        let s = TimeoutScheduler()
        var ticks: [UInt64] = []
        var timedOut = false
        var pending: TimeoutScheduler.Handle?
        func tick(at deadline: UInt64) {
            pending = s.schedule(atMs: deadline) {
                ticks.append(s.nowMs)
                tick(at: deadline + 60_000)
            }
        }
        // The next tick is always pending and its closure holds the scheduler:
        // cancel it at the end so nothing is left in a cycle (LeakSanitizer).
        defer { if let pending { _ = s.cancel(pending) } }
        tick(at: 60_000)
        s.schedule(afterMs: 3_600_000) { timedOut = true }
        try s.advance(byMs: 3_599_999)
        #expect(!timedOut)
        #expect(ticks.count == 59)
        try s.advance(byMs: 1)
        #expect(timedOut)
        #expect(ticks.count == 60)
        #expect(ticks == (1...60).map { UInt64($0) * 60_000 })
        #expect(s.wallClockMs == s.manualEpochMs + 3_600_000)
    }

    @Test("advance on a system clock is a clear error")
    func systemClockAdvance() {
        let loop = EventLoop()
        let s = TimeoutScheduler(loop: loop, clock: .system)
        #expect(throws: TimeoutScheduler.SchedulerError.notManualClock) { try s.advance(byMs: 1) }
    }

    @Test("system clock: fires in order on the loop and never early")
    func systemClock() {
        let loop = EventLoop()
        let s = TimeoutScheduler(loop: loop)
        let start = ContinuousClock.now
        var fired: [(Int, Duration)] = []
        for (i, d) in [30, 10, 20, 10].enumerated() {
            s.schedule(afterMs: UInt64(d)) { fired.append((i, ContinuousClock.now - start)) }
        }
        let cancelled = s.schedule(afterMs: 5) { fired.append((99, .zero)) }
        #expect(s.cancel(cancelled))
        loop.run() // returns when nothing is pending
        #expect(fired.map(\.0) == [1, 3, 2, 0])
        for (i, at) in fired {
            let want = [30, 10, 20, 10][i]
            #expect(at >= .milliseconds(want), "timeout \(i) fired at \(at), before \(want) ms")
        }
    }

    @Test("system clock: a stale loop time does not make a timeout early")
    func staleLoopTime() {
        let loop = EventLoop()
        let s = TimeoutScheduler(loop: loop)
        loop.runOnce()             // loop time cached now...
        usleep(40_000)             // ...and 40 ms stale by the time we schedule
        let start = ContinuousClock.now
        var at: Duration?
        s.schedule(afterMs: 25) { at = ContinuousClock.now - start }
        loop.run()
        #expect(at != nil)
        if let at { #expect(at >= .milliseconds(25), "fired after \(at)") }
    }

    @Test("keepsLoopAlive false: pending timeouts do not hold run() open")
    func unref() {
        let loop = EventLoop()
        let s = TimeoutScheduler(loop: loop)
        s.keepsLoopAlive = false
        var fired = false
        s.schedule(afterMs: 60_000) { fired = true }
        let start = ContinuousClock.now
        loop.run()
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(!fired && s.pendingCount == 1)
    }

    @Test("many timeouts against a sorted reference")
    func randomized() throws {
        let s = TimeoutScheduler()
        var rng = SplitMix64(seed: 42)
        var expected: [(deadline: UInt64, seq: Int)] = []
        var got: [Int] = []
        var handles: [(TimeoutScheduler.Handle, Int)] = []
        for i in 0..<5000 {
            let d = rng.next() % 2000
            let h = s.schedule(afterMs: d) { got.append(i) }
            handles.append((h, i))
            expected.append((d, i))
        }
        var cancelled = Set<Int>()
        for _ in 0..<1500 {
            let (h, i) = handles[Int(rng.next() % UInt64(handles.count))]
            if s.cancel(h) { cancelled.insert(i) }
        }
        try s.advance(byMs: 2000)
        let want = expected.filter { !cancelled.contains($0.seq) }
            .sorted { ($0.deadline, $0.seq) < ($1.deadline, $1.seq) }.map(\.seq)
        #expect(got == want)
        #expect(s.pendingCount == 0)
    }

    @Test("token timeouts mix with closure timeouts in one order")
    func tokens() throws {
        let s = TimeoutScheduler()
        var log: [String] = []
        s.onToken = { log.append("t\($0)") }
        s.schedule(afterMs: 20, token: 2)
        s.schedule(afterMs: 10) { log.append("c10") }
        let t3 = s.schedule(afterMs: 15, token: 3)
        s.schedule(afterMs: 10, token: .max)
        #expect(s.cancel(t3))
        #expect(!s.cancel(t3))
        // A closure timeout reusing the cancelled token's slot still works.
        s.schedule(afterMs: 30) { log.append("c30") }
        try s.advance(byMs: 100)
        #expect(log == ["c10", "t\(UInt64.max)", "t2", "c30"])
    }

    @Test("memory per pending timeout at the C level stays within 64 bytes")
    func memoryBudget() {
        let s = TimeoutScheduler()
        for i in 0..<100_000 { s.schedule(afterMs: UInt64(i % 977)) {} }
        let perPending = Double(s.memoryBytes.c) / 100_000
        #expect(perPending <= 64, "C bytes per pending: \(perPending)")
    }

    @Test("a million pending under steady churn (cancel one, schedule one) stay within 64 bytes each: the heap reclaims tombstones instead of growing")
    func churnMemory() {
        let s = TimeoutScheduler()
        s.onToken = { _ in }
        let n = 1_000_000
        var handles = (0..<n).map { s.schedule(afterMs: 60_000 + UInt64($0 % 3_600_000), token: UInt64($0)) }
        let filled = s.memoryBytes.c
        var rng = SplitMix64(seed: 7)
        for _ in 0..<n {
            let i = Int(rng.next() % UInt64(n))
            #expect(s.cancel(handles[i]))
            handles[i] = s.schedule(afterMs: 60_000 + rng.next() % 3_600_000, token: UInt64(i))
        }
        #expect(s.pendingCount == n)
        #expect(s.memoryBytes.c == filled, "grew from \(filled) to \(s.memoryBytes.c) bytes")
        #expect(Double(s.memoryBytes.c) / Double(n) <= 64)
    }

    @Test("dropping the scheduler drops pending closures uncalled")
    func deinitDrops() {
        final class Box { var hit = false }
        let box = Box()
        weak var weakBox: Box?
        do {
            let s = TimeoutScheduler()
            let captured = Box()
            weakBox = captured
            s.schedule(afterMs: 1) { captured.hit = true; box.hit = true }
        }
        #expect(weakBox == nil)
        #expect(!box.hit)
    }
}
