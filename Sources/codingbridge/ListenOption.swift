import ArgumentParser
import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// One `--listen` value: `unix:PATH`, `unix` for `<state dir>/codingbridge.sock`,
/// or `ws://HOST:PORT` / `wss://HOST:PORT` for the network.
struct ListenAddress: ExpressibleByArgument {
    /// nil: the default path in the state directory (unix only).
    let path: String?
    /// Set for ws:// and wss://.
    let network: NetworkAddress?

    init?(argument: String) {
        if let n = NetworkAddress(argument) { path = nil; network = n; return }
        network = nil
        if argument == "unix" { path = nil; return }
        guard argument.hasPrefix("unix:") else { return nil }
        let p = String(argument.dropFirst(5))
        guard !p.isEmpty else { return nil }
        path = p
    }

    static var defaultValueDescription: String { "unix[:PATH] | ws://HOST:PORT | wss://HOST:PORT" }

    /// The socket path; the default needs a state directory (not --ephemeral).
    func resolve(stateDir: String?, ephemeral: Bool, log: Logger) throws -> String {
        if let path { return path }
        if ephemeral {
            throw ValidationError("--listen unix without a path needs the state directory; with --ephemeral give one: --listen unix:PATH")
        }
        let dir = ListenAddress.stateDirectory(stateDir)
        try ListenAddress.ensurePrivateDirectory(dir, log: log)
        return ListenAddress.socketPath(stateDir: dir)
    }

    /// --state-dir, else the default state directory (XDG).
    static func stateDirectory(_ option: String?) -> String {
        option ?? Store.defaultDirectory(environment: ProcessInfo.environmentSubset)
    }

    /// Where `--listen unix` puts the socket (and where the hook looks for it).
    static func socketPath(stateDir: String?) -> String { stateDirectory(stateDir) + "/codingbridge.sock" }

    /// Creates the state directory (and parents) 0700, or tightens an
    /// existing one we own to 0700: the socket's directory is what keeps
    /// other users from reaching it.
    static func ensurePrivateDirectory(_ dir: String, log: Logger) throws {
        var st = stat()
        if stat(dir, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw ValidationError("\(dir) exists and is not a directory") }
            if st.st_mode & 0o077 != 0 && st.st_uid == getuid() {
                if chmod(dir, 0o700) == 0 { log.info("state directory \(dir) made private (0700)") }
            }
            return
        }
        var built = dir.hasPrefix("/") ? "" : "."
        for part in dir.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                throw ValidationError("cannot create the state directory \(built): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// `ws://HOST:PORT` or `wss://HOST:PORT`; HOST an IP address or localhost
/// (IPv6 in brackets), PORT 0 for a free one.
struct NetworkAddress {
    let tls: Bool
    var host: String
    let port: Int

    init?(_ s: String) {
        let rest: Substring
        if s.hasPrefix("ws://") { tls = false; rest = s.dropFirst(5) }
        else if s.hasPrefix("wss://") { tls = true; rest = s.dropFirst(6) }
        else { return nil }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
              (0...65535).contains(port) else { return nil }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" { host = "127.0.0.1" }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
    }

    /// 127.0.0.0/8 and ::1; 0.0.0.0, :: and LAN addresses are not.
    var isLoopback: Bool { host == "::1" || host.hasPrefix("127.") }

    func url(port bound: Int) -> String { (tls ? "wss://" : "ws://") + authority(bound) }
    func httpURL(port bound: Int) -> String { (tls ? "https://" : "http://") + authority(bound) }
    private func authority(_ port: Int) -> String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
}

enum ProcessInfo {
    static var environmentSubset: [String: String] {
        var e: [String: String] = [:]
        for name in ["XDG_STATE_HOME", "HOME"] { if let v = getenv(name) { e[name] = String(cString: v) } }
        return e
    }
}

/// Lets the server hold up to the hard limit of open files: 1,000 socket
/// clients need more than the usual soft limit of 1,024 leaves after stdio,
/// the database and libuv's own descriptors.
func raiseOpenFileLimit() {
    var r = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) == 0, r.rlim_cur < r.rlim_max else { return }
    r.rlim_cur = r.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &r)
}
