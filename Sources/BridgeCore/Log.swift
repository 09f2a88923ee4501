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

/// The process-wide stderr logger (used on the loop thread only).
public enum Log {
    nonisolated(unsafe) public static var level: LogLevel = .info

    public static func enabled(_ l: LogLevel) -> Bool { l <= level }

    public static func write(_ l: LogLevel, _ message: @autoclosure () -> String) {
        guard enabled(l) else { return }
        let line = "codingbridge[\(l.rawValue)]: \(message())\n"
        fputs(line, stderr)
    }
    public static func error(_ m: @autoclosure () -> String) { write(.error, m()) }
    public static func warn(_ m: @autoclosure () -> String) { write(.warn, m()) }
    public static func info(_ m: @autoclosure () -> String) { write(.info, m()) }
    public static func debug(_ m: @autoclosure () -> String) { write(.debug, m()) }
}
