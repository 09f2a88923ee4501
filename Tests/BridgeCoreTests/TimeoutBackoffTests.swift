import Testing
@testable import BridgeCore

@Suite("Backoff")
struct TimeoutBackoffTests {
    @Test("nominal delays grow by factor and stop at the cap")
    func nominal() throws {
        let b = try Backoff(baseMs: 100, factor: 2, capMs: 1_000, maxAttempts: 10, jitter: .none)
        #expect((1...10).map { b.nominalDelayMs(attempt: $0)! } == [100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000, 1000])
        #expect(b.nominalDelayMs(attempt: 0) == nil)
        #expect(b.nominalDelayMs(attempt: -3) == nil)
        #expect(b.nominalDelayMs(attempt: 11) == nil)
        #expect(b.delayMs(attempt: 3, seed: 1) == 400)
    }

    @Test("unbounded attempts and huge exponents saturate at the cap")
    func saturation() throws {
        let b = try Backoff(baseMs: 1, factor: 10, capMs: 3_600_000, maxAttempts: nil, jitter: .full)
        #expect(b.nominalDelayMs(attempt: .max) == 3_600_000)
        #expect(b.nominalDelayMs(attempt: 5000) == 3_600_000)
        #expect(b.delayMs(attempt: .max, seed: 9)! <= 3_600_000)
        let big = try Backoff(baseMs: .max, factor: 1, capMs: .max, jitter: .proportional(1))
        // Jitter around UInt64.max reaches past 2^64: those draws clamp to
        // .max (no trap), the others still spread below it.
        let draws = (0..<64).map { big.delayMs(attempt: 1, seed: $0)! }
        #expect(draws.contains(.max))
        #expect(draws.contains { $0 < .max / 2 })
    }

    @Test("same seed and attempt give the same delay; seeds differ")
    func determinism() throws {
        let b = Backoff.connection
        let a1 = b.schedule(seed: 1234, limit: 20)
        #expect(a1 == b.schedule(seed: 1234, limit: 20))
        #expect(a1 != b.schedule(seed: 1235, limit: 20))
        var r1 = SplitMix64(seed: 5), r2 = SplitMix64(seed: 5)
        #expect((1...8).map { b.delayMs(attempt: $0, using: &r1)! } == (1...8).map { b.delayMs(attempt: $0, using: &r2)! })
        // SplitMix64 reference values (seed 0), stable across platforms.
        var g = SplitMix64(seed: 0)
        #expect(g.next() == 0xE220_A839_7B1D_CDAF)
        #expect(g.next() == 0x6E78_9E6A_A1B9_65F4)
    }

    @Test("jitter stays in its bounds and actually spreads", arguments: [
        Backoff.Jitter.full, .equal, .proportional(0.25), .proportional(1), .none,
    ])
    func bounds(_ jitter: Backoff.Jitter) throws {
        let b = try Backoff(baseMs: 1_000, factor: 3, capMs: 20_000, maxAttempts: 6, jitter: jitter)
        for attempt in 1...6 {
            let d = b.nominalDelayMs(attempt: attempt)!
            var seen = Set<UInt64>()
            for seed in 0..<2000 as Range<UInt64> {
                let v = b.delayMs(attempt: attempt, seed: seed)!
                seen.insert(v)
                #expect(v <= 20_000)
                switch jitter {
                case .none: #expect(v == d)
                case .full: #expect(v <= d)
                case .equal: #expect(v >= d / 2 && v <= d)
                case .proportional(let f):
                    #expect(Double(v) >= (Double(d) * (1 - f)).rounded(.down) && Double(v) <= min(Double(d) * (1 + f), 20_000))
                }
            }
            if jitter != .none { #expect(seen.count > 100, "attempt \(attempt): only \(seen.count) distinct delays") }
        }
        #expect(b.delayMs(attempt: 7, seed: 0) == nil)
        #expect(b.schedule(seed: 0).count == 6)
    }

    @Test("full jitter is roughly uniform (mean near d/2)")
    func uniformity() throws {
        let b = try Backoff(baseMs: 10_000, capMs: 10_000, jitter: .full)
        let n = 20_000
        let mean = (0..<n).map { Double(b.delayMs(attempt: 1, seed: UInt64($0))!) }.reduce(0, +) / Double(n)
        #expect(abs(mean - 5_000) < 150)
    }

    @Test("invalid configurations name the field")
    func invalid() {
        #expect(throws: Backoff.ConfigurationError.invalid(field: "baseMs", reason: "must be > 0")) {
            try Backoff(baseMs: 0, capMs: 1)
        }
        #expect(throws: Backoff.ConfigurationError.self) { try Backoff(baseMs: 1, factor: 0.5, capMs: 10) }
        #expect(throws: Backoff.ConfigurationError.self) { try Backoff(baseMs: 1, factor: .nan, capMs: 10) }
        #expect(throws: Backoff.ConfigurationError.self) { try Backoff(baseMs: 10, capMs: 1) }
        #expect(throws: Backoff.ConfigurationError.self) { try Backoff(baseMs: 1, capMs: 10, maxAttempts: 0) }
        #expect(throws: Backoff.ConfigurationError.self) { try Backoff(baseMs: 1, capMs: 10, jitter: .proportional(1.5)) }
    }
}
