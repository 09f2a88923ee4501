/// Engine deadlines (approval timeouts, long-task reminders) in a min-heap.
/// Entries are invalidated lazily: when one reaches the top, the engine checks
/// that it still matches its session's state, so resolving an approval never
/// has to search the heap. The host asks `nextDeadline` after each event and
/// schedules one timer (TimeoutScheduler) for it.
struct DeadlineHeap: Equatable, Sendable {
    enum Kind: Equatable, Sendable {
        case approvalTimeout(requestId: String)
        case longTaskReminder(sessionId: String)
        case connectionRetry
        case connectionLost(since: Millis)
    }
    struct Entry: Equatable, Sendable {
        var at: Millis
        var seq: UInt64
        var kind: Kind
        static func < (a: Entry, b: Entry) -> Bool { a.at != b.at ? a.at < b.at : a.seq < b.seq }
    }
    private(set) var items: [Entry] = []
    private var seq: UInt64 = 0

    var top: Entry? { items.first }
    var count: Int { items.count }

    mutating func push(_ at: Millis, _ kind: Kind) {
        seq &+= 1
        items.append(Entry(at: at, seq: seq, kind: kind))
        var i = items.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            guard items[i] < items[p] else { break }
            items.swapAt(i, p)
            i = p
        }
    }

    @discardableResult
    mutating func pop() -> Entry? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let e = items.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < items.count, items[l] < items[m] { m = l }
            if r < items.count, items[r] < items[m] { m = r }
            if m == i { break }
            items.swapAt(i, m)
            i = m
        }
        return e
    }
}
