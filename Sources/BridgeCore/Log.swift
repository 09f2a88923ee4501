#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Severity for stderr logging. stdout carries protocol only, so every log
/// line goes to stderr, and only at or above the configured level.
public enum LogLevel: String, CaseIterable, Comparable, Sendable {
    case error, warn, info, debug

    private var rank: Int {
        switch self {
        case .error: return 0
        case .warn: return 1
        case .info: return 2
        case .debug: return 3
        }
    }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// A stderr logger handed to whoever logs (the server takes it from its
/// options): a value, so two servers in one process (tests) keep their own
/// levels and nothing global is overwritten.
public struct Logger: Sendable {
    public var level: LogLevel

    public init(level: LogLevel = .info) { self.level = level }

    public func enabled(_ l: LogLevel) -> Bool { l <= level }

    public func write(_ l: LogLevel, _ message: @autoclosure () -> String) {
        guard enabled(l) else { return }
        fputs("codingbridge[\(l.rawValue)]: \(message())\n", stderr)
    }
    public func error(_ m: @autoclosure () -> String) { write(.error, m()) }
    public func warn(_ m: @autoclosure () -> String) { write(.warn, m()) }
    public func info(_ m: @autoclosure () -> String) { write(.info, m()) }
    public func debug(_ m: @autoclosure () -> String) { write(.debug, m()) }
}
