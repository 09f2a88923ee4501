import ArgumentParser
import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// One `--listen` value: `unix:PATH`, or `unix` for `<state dir>/codingbridge.sock`.
struct ListenAddress: ExpressibleByArgument {
    /// nil: the default path in the state directory.
    let path: String?

    init?(argument: String) {
        if argument == "unix" { path = nil; return }
        guard argument.hasPrefix("unix:") else { return nil }
        let p = String(argument.dropFirst(5))
        guard !p.isEmpty else { return nil }
        path = p
    }

    static var defaultValueDescription: String { "unix[:PATH]" }

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
