/// Failed pairing and authentication attempts, limited per source host and
/// globally over a sliding window, so a network peer cannot guess codes or
/// tokens at line rate. Over the limit, attempts are refused without even
/// checking the code.
final class FailureLimiter {
    let windowMs: UInt64
    let perHost: Int
    let global: Int
    private var byHost: [String: [UInt64]] = [:]
    private var all: [UInt64] = []

    init(windowMs: UInt64 = 60_000, perHost: Int = 10, global: Int = 100) {
        self.windowMs = windowMs
        self.perHost = perHost
        self.global = global
    }

    /// The host's own limit or the global one is reached at `nowMs`.
    func isLimited(_ host: String, nowMs: UInt64) -> Bool {
        prune(nowMs)
        return all.count >= global || (byHost[host]?.count ?? 0) >= perHost
    }

    func record(_ host: String, nowMs: UInt64) {
        prune(nowMs)
        all.append(nowMs)
        byHost[host, default: []].append(nowMs)
    }

    private func prune(_ now: UInt64) {
        let expired = { (t: UInt64) in t &+ self.windowMs <= now }
        // Failures are recorded in time order: the expired ones lead.
        all.removeFirst(all.prefix(while: expired).count)
        for (host, times) in byHost {
            let kept = times.drop(while: expired)
            byHost[host] = kept.isEmpty ? nil : Array(kept)
        }
    }

    /// The host part of "192.0.2.1:51234" or "[::1]:51234" (the port changes
    /// with every connection, so it must not split a peer's count).
    static func host(of address: String) -> String {
        if address.hasPrefix("["), let end = address.firstIndex(of: "]") {
            return String(address[address.index(after: address.startIndex)..<end])
        }
        if address.filter({ $0 == ":" }).count == 1, let colon = address.lastIndex(of: ":") {
            return String(address[..<colon])
        }
        return address
    }
}
