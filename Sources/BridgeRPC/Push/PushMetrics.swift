import BridgeCore

/// Pushes sent, failed and retried per platform, and the time from the
/// effect to the service's 2xx (the last 1,024 per platform), for metrics.get.
final class PushMetrics {
    private struct Counts {
        var sent: UInt64 = 0
        var failed: UInt64 = 0
        var retried: UInt64 = 0
        var latenciesMs: [Double] = []
        var next = 0
    }
    static let window = 1024
    private var counts: [PushRegistration.Platform: Counts] = [:]

    func sent(_ p: PushRegistration.Platform, latencyNs: UInt64) {
        // In place: a copy of Counts would copy its 1,024 latencies on every push.
        Self.record(&counts[p, default: Counts()], ms: Double(latencyNs) / 1e6)
    }

    private static func record(_ c: inout Counts, ms: Double) {
        c.sent &+= 1
        if c.latenciesMs.count < window { c.latenciesMs.append(ms) } else { c.latenciesMs[c.next] = ms }
        c.next = (c.next + 1) % window
    }

    func failed(_ p: PushRegistration.Platform) { counts[p, default: Counts()].failed &+= 1 }
    func retried(_ p: PushRegistration.Platform) { counts[p, default: Counts()].retried &+= 1 }

    var json: JSON {
        var o: [String: JSON] = [:]
        for p in PushRegistration.Platform.allCases {
            let c = counts[p] ?? Counts()
            let sorted = c.latenciesMs.sorted()
            func pct(_ q: Double) -> JSON {
                sorted.isEmpty ? .null : .double(sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * q + 0.5))])
            }
            o[p.rawValue] = ["sent": .int(Int64(clamping: c.sent)), "failed": .int(Int64(clamping: c.failed)),
                             "retried": .int(Int64(clamping: c.retried)),
                             "latencyMs": ["count": .int(Int64(sorted.count)), "p50": pct(0.5), "p99": pct(0.99),
                                           "max": sorted.last.map { .double($0) } ?? .null]]
        }
        return .object(o)
    }
}
