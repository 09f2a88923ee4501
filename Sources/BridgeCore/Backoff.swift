#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Exponential backoff with jitter, as a pure function.
///
/// `delayMs(attempt:seed:)` depends only on its arguments, so the engine can
/// persist a retry's seed and attempt number and recompute the same delay after
/// a restart, and tests can assert exact values. The `using:` variant draws from
/// a caller-owned generator instead (one stream of retries, one generator).
///
/// Attempts are 1-based: attempt 1 is the delay before the first retry. The
/// un-jittered delay is `min(cap, base * factor^(attempt-1))`; jitter then
/// spreads it within the bounds described by `Jitter`, never above `capMs`.
/// When `maxAttempts` is set, attempts beyond it return nil: give up.
public struct Backoff: Sendable, Equatable, Hashable {
    /// How a computed delay `d` is randomised so that many clients that failed
    /// together do not retry together.
    public enum Jitter: Sendable, Equatable, Hashable {
        /// Exactly `d` (deterministic, for tests and UIs that show a countdown).
        case none
        /// Uniform in `[0, d]` ("full jitter"): best spread, may retry immediately.
        case full
        /// Uniform in `[d/2, d]` ("equal jitter"): spread, but never a hot loop.
        case equal
        /// Uniform in `[d*(1-f), d*(1+f)]`, then clamped to `capMs`; `f` in [0, 1].
        case proportional(Double)
    }

    public enum ConfigurationError: Error, Equatable, CustomStringConvertible {
        case invalid(field: String, reason: String)
        public var description: String {
            switch self { case let .invalid(f, r): return "invalid backoff \(f): \(r)" }
        }
    }

    public let baseMs: UInt64
    public let factor: Double
    public let capMs: UInt64
    /// nil: retry forever (the delay stays at `capMs` once reached).
    public let maxAttempts: Int?
    public let jitter: Jitter

    /// Throws `ConfigurationError` naming the field when a value makes no sense:
    /// base 0 or above cap, factor < 1 or not finite, maxAttempts < 1,
    /// proportional jitter outside [0, 1].
    public init(baseMs: UInt64, factor: Double = 2, capMs: UInt64, maxAttempts: Int? = nil,
                jitter: Jitter = .equal) throws {
        guard baseMs > 0 else { throw ConfigurationError.invalid(field: "baseMs", reason: "must be > 0") }
        guard factor.isFinite, factor >= 1 else {
            throw ConfigurationError.invalid(field: "factor", reason: "must be finite and >= 1, got \(factor)")
        }
        guard capMs >= baseMs else {
            throw ConfigurationError.invalid(field: "capMs", reason: "must be >= baseMs (\(baseMs)), got \(capMs)")
        }
        if let m = maxAttempts, m < 1 {
            throw ConfigurationError.invalid(field: "maxAttempts", reason: "must be >= 1 or nil, got \(m)")
        }
        if case .proportional(let f) = jitter, !(f >= 0 && f <= 1) {
            throw ConfigurationError.invalid(field: "jitter", reason: "proportional fraction must be in [0, 1], got \(f)")
        }
        self.baseMs = baseMs
        self.factor = factor
        self.capMs = capMs
        self.maxAttempts = maxAttempts
        self.jitter = jitter
    }

    /// Reconnects: 1 s, 2 s, 4 s ... capped at 60 s, equal jitter, forever.
    public static let connection = try! Backoff(baseMs: 1_000, factor: 2, capMs: 60_000, maxAttempts: nil, jitter: .equal)
    /// Outbox deliveries: 500 ms doubling to 5 min, full jitter, 12 attempts.
    public static let delivery = try! Backoff(baseMs: 500, factor: 2, capMs: 300_000, maxAttempts: 12, jitter: .full)

    /// The delay before retry `attempt` without jitter; nil when `attempt` < 1
    /// or beyond `maxAttempts`. Never overflows: huge exponents saturate at cap.
    public func nominalDelayMs(attempt: Int) -> UInt64? {
        guard attempt >= 1 else { return nil }
        if let m = maxAttempts, attempt > m { return nil }
        // pow may be +inf for large attempts; min() with cap handles that.
        let raw = Double(baseMs) * pow(factor, Double(attempt - 1))
        return min(Self.clampedUInt64(raw), capMs)
    }

    /// The jittered delay for `attempt`, a pure function of (attempt, seed).
    public func delayMs(attempt: Int, seed: UInt64) -> UInt64? {
        // Each (seed, attempt) pair gets its own independent-looking stream.
        var rng = SplitMix64(seed: seed ^ (UInt64(truncatingIfNeeded: attempt) &* 0xD6E8_FEB8_6659_FD93))
        return delayMs(attempt: attempt, using: &rng)
    }

    /// The jittered delay for `attempt`, drawing randomness from `rng`.
    public func delayMs<R: RandomNumberGenerator>(attempt: Int, using rng: inout R) -> UInt64? {
        guard let d = nominalDelayMs(attempt: attempt) else { return nil }
        let u = Self.unitInterval(rng.next())  // [0, 1)
        let dd = Double(d)
        let value: Double
        switch jitter {
        case .none: return d
        case .full: value = u * (dd + 1)  // [0, d] inclusive after floor
        case .equal: value = dd / 2 + u * (dd / 2 + 1)
        case .proportional(let f): value = dd * (1 - f) + u * (2 * f * dd + 1)
        }
        return min(Self.clampedUInt64(value), capMs)
    }

    /// floor(x) as UInt64 without trapping: NaN and negatives give 0, values
    /// at or above 2^64 (Double(UInt64.max) rounds up to 2^64) give .max.
    @inline(__always)
    static func clampedUInt64(_ x: Double) -> UInt64 {
        guard x > 0 else { return 0 }
        guard x < 18_446_744_073_709_551_616.0 else { return .max }
        return UInt64(x.rounded(.down))
    }

    /// Every delay until `maxAttempts` (or the first `limit` when unbounded).
    public func schedule(seed: UInt64, limit: Int = 32) -> [UInt64] {
        let n = maxAttempts.map { Swift.min($0, limit) } ?? limit
        return n < 1 ? [] : (1...n).compactMap { delayMs(attempt: $0, seed: seed) }
    }

    /// 53 random bits -> a Double uniformly in [0, 1).
    @inline(__always)
    static func unitInterval(_ x: UInt64) -> Double { Double(x >> 11) * 0x1.0p-53 }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast, seedable generator with
/// a full 2^64 period. Deterministic across platforms, so a seed reproduces
/// the same jitter everywhere. Not for cryptography.
public struct SplitMix64: RandomNumberGenerator, Sendable, Equatable, Hashable {
    public private(set) var state: UInt64
    public init(seed: UInt64) { state = seed }
    /// A seed from the system generator, for production use.
    public init() { var g = SystemRandomNumberGenerator(); state = g.next() }

    @inline(__always)
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

