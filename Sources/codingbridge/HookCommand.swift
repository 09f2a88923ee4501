import ArgumentParser
import BridgeCore
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

/// `codingbridge hook`: what Claude Code runs as a hook command. Reads the
/// hook input on stdin, hands it to the running server (`agent.hook` over
/// the server's unix socket) and, for PermissionRequest, prints Claude
/// Code's decision JSON once a person decided on another device.
///
/// The contract with Claude Code is "never break the agent": whatever goes
/// wrong (no server, a server that does not answer, bad input, time out) the
/// hook prints nothing and exits 0, so Claude Code carries on and asks in its
/// own prompt. A SIGALRM set at start bounds the whole run even if something
/// below blocks where it should not.
struct HookCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hook",
        abstract: "Claude Code hook: forward the hook input to the server; answer PermissionRequest from the phone.",
        discussion: """
        Wire it in ~/.claude/settings.json for the events SessionStart, \
        UserPromptSubmit, PreToolUse, PostToolUse, PermissionRequest, \
        Notification, Stop, SubagentStop and SessionEnd, with command \
        'codingbridge hook'. Claude Code writes the hook input JSON on stdin.

        PermissionRequest: when someone can answer (another connected \
        client, or a device with a push registration; or the server runs \
        with --always-wait-for-approval), waits until the person allows or \
        denies (approval.respond) and prints \
        {"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}} \
        or the deny form with a message. PreToolUse of AskUserQuestion waits \
        the same way for the answer (question.answer) and prints an allow \
        with the answers in updatedInput. The approval expires 2 s before \
        --timeout, so the server and the hook agree on when it ends. Other \
        events: forwarded, exit within --event-timeout.

        Exit status is always 0. On timeout, when no server listens, or on \
        any error the hook prints nothing (--verbose says why on stderr), and Claude \
        Code falls back to its own permission prompt.

        Socket: --socket (or --state-dir DIR: DIR/codingbridge.sock), else \
        $CODINGBRIDGE_SOCKET, else \
        $XDG_STATE_HOME/codingbridge/codingbridge.sock (or \
        ~/.local/state/codingbridge/codingbridge.sock): what \
        'codingbridge serve --listen unix' uses.

        --print-settings prints the settings.json block that wires every \
        event to this command. With --http it prints http hooks instead: \
        Claude Code posts the same input to http://HOST:PORT/hooks/claude \
        (--url, else the first loopback ws:// address in \
        <state dir>/listen.json) with 'Authorization: Bearer \
        $CODINGBRIDGE_HOOK_TOKEN'; export that variable from \
        <state dir>/hook-token, which 'codingbridge serve' creates (0600).
        """)

    @Option(name: .long, help: "The server's unix socket (default: $CODINGBRIDGE_SOCKET, else the state directory's codingbridge.sock).")
    var socket: String?

    @Option(name: .long, help: "The server's --state-dir: its socket is <dir>/codingbridge.sock (when --socket is not given).")
    var stateDir: String?

    @Option(name: .long, parsing: .unconditional, help: "Seconds to wait for a permission decision, in (0, 86400]; keep it under the hook's timeout in settings.json.")
    var timeout: Double = ClaudeHookExchange.defaultWaitSeconds

    @Option(name: .long, parsing: .unconditional, help: "Seconds to wait for the server to take any other event, in (0, 3600].")
    var eventTimeout: Double = 3

    @Flag(name: .long, help: "Explain on stderr what happened.")
    var verbose = false

    @Flag(name: .long, help: "Print the hooks block for Claude Code's settings.json and exit.")
    var printSettings = false

    @Flag(name: .long, help: "With --print-settings: http hooks to the server instead of command hooks.")
    var http = false

    @Option(name: .long, help: "With --print-settings --http: the hook URL (default: from <state dir>/listen.json).")
    var url: String?

    func validate() throws {
        try OptionRange.check("--timeout", timeout, 0, 86_400, unit: "seconds")
        try OptionRange.check("--event-timeout", eventTimeout, 0, 3600, unit: "seconds")
        if (http || url != nil) && !printSettings { throw ValidationError("--http and --url go with --print-settings") }
        if url != nil && !http { throw ValidationError("--url goes with --http") }
    }

    func run() throws {
        if printSettings { return try printSettingsBlock() }
        let start = HookClock.now()
        // Hard bound: whatever happens below, exit 0 shortly after the deadline.
        signal(SIGALRM) { _ in _exit(0) }
        signal(SIGPIPE, SIG_IGN)
        alarm(UInt32(min(timeout, 10).rounded(.up)) + 2)

        let note: (String) -> Void = { msg in
            if verbose { HookIO.stderr("codingbridge hook: \(msg)") }
        }
        // Claude Code writes the input and closes stdin; a terminal without
        // input must not hold the hook either.
        guard let input = HookIO.readAll(fd: 0, deadline: start + min(timeout, 10), limit: 16 << 20) else {
            note("no complete input on stdin")
            return
        }
        guard case .object(var object)? = JSON.parse(String(decoding: input, as: UTF8.self)) else {
            note("stdin is not a JSON object")
            return
        }
        let event = object["hook_event_name"]?.stringValue ?? ""
        let waitsForDecision = ClaudeHookExchange.prepare(&object, waitSeconds: timeout)
        let deadline = start + (waitsForDecision ? timeout : min(timeout, eventTimeout))
        // Re-armed for this event: the backstop sits one second past the deadline.
        alarm(UInt32(max(0, deadline - HookClock.now()).rounded(.up)) + 1)

        let path = HookSocket.path(option: socket ?? stateDir.map { ListenAddress.socketPath(stateDir: $0) })
        let fd: Int32
        switch HookSocket.connect(path, deadline: deadline) {
        case .success(let f): fd = f
        case .failure(let why):
            note("no server at \(path): \(why)")
            return
        }
        defer { close(fd) }

        let initialize: JSON = ["jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": ["clientInfo": ["name": "codingbridge hook", "version": "1"], "capabilities": ["notifications": false]]]
        let call: JSON = ["jsonrpc": "2.0", "id": 2, "method": "agent.hook", "params": .object(object)]
        guard HookIO.writeAll(fd: fd, Array((initialize.serialized() + "\n" + call.serialized() + "\n").utf8), deadline: deadline) else {
            note("could not send to \(path)")
            return
        }
        // Replies (ids 1 and 2) and notifications share the stream; only id 2 matters.
        var reader = HookLineReader(fd: fd)
        while let line = reader.next(deadline: deadline) {
            guard case .object(let msg)? = JSON.parse(line), msg["id"] == .int(2) else { continue }
            if let err = msg["error"] {
                HookIO.stderr("codingbridge hook: the server refused the \(event.isEmpty ? "hook input" : event): "
                              + (err["message"]?.stringValue ?? "error") + " " + (err["data"].map { $0.serialized() } ?? ""))
                return
            }
            let result = msg["result"] ?? .null
            if result["decision"]?.stringValue == "noAnswerer" {
                note("nobody can answer: no client connected and no push registration; Claude Code's own prompt decides")
            } else {
                note(waitsForDecision ? "decision: \(result["decision"]?.stringValue ?? "?")"
                                      : "\(event): \(result["status"]?.stringValue ?? "?")")
            }
            HookIO.stdout(ClaudeHookExchange.output(result))
            return
        }
        note(reader.failed ? "connection to \(path) closed before the answer" : "no answer within the timeout")
    }
}

extension HookCommand {
    /// Settings are for a person at a terminal: unlike the hook itself,
    /// a problem here is an error with a non-zero exit.
    func printSettingsBlock() throws {
        guard http else {
            return HookIO.stdout(HookSettings.text(HookSettings.command(stateDir: stateDir)))
        }
        let dir = ListenAddress.stateDirectory(stateDir)
        HookIO.stdout(HookSettings.text(HookSettings.http(url: try url ?? HookSettings.hookURL(stateDir: dir))))
        HookIO.stderr("""
            Claude Code sends the token from the environment; before starting claude:
              export \(HookSettings.tokenVariable)=$(cat \(HookSettings.shellQuoted(dir + "/" + HookToken.fileName)))
            """)
    }
}

enum HookClock {
    /// Monotonic seconds.
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func remainingMs(_ deadline: Double) -> Int32 {
        let ms = (deadline - now()) * 1000
        return ms <= 0 ? 0 : Int32(min(ms.rounded(.up), Double(Int32.max)))
    }
}

enum HookIO {
    static func stderr(_ s: String) {
        let b = Array((s + "\n").utf8)
        _ = b.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    static func stdout(_ s: String) {
        let b = Array(s.utf8)
        var off = 0
        while off < b.count {
            let n = b.withUnsafeBytes { write(1, $0.baseAddress! + off, $0.count - off) }
            if n < 0 { if errno == EINTR { continue }; return }
            off += n
        }
    }

    /// Waits until `fd` is ready for `events` or the deadline passes.
    static func ready(_ fd: Int32, _ events: Int16, deadline: Double) -> Bool {
        while true {
            var p = pollfd(fd: fd, events: events, revents: 0)
            let r = poll(&p, 1, HookClock.remainingMs(deadline))
            if r > 0 { return true }
            if r == 0 { return false }
            if errno != EINTR { return false }
            if HookClock.remainingMs(deadline) == 0 { return false }
        }
    }

    /// All of `fd` until EOF; nil on timeout, error or more than `limit` bytes.
    static func readAll(fd: Int32, deadline: Double, limit: Int) -> [UInt8]? {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            guard ready(fd, Int16(POLLIN), deadline: deadline) else { return nil }
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return out }
            if n < 0 { if errno == EINTR || errno == EAGAIN { continue }; return nil }
            out += buf[0..<n]
            if out.count > limit { return nil }
        }
    }

    static func writeAll(fd: Int32, _ bytes: [UInt8], deadline: Double) -> Bool {
        var off = 0
        while off < bytes.count {
            guard ready(fd, Int16(POLLOUT), deadline: deadline) else { return false }
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + off, $0.count - off, Int32(MSG_NOSIGNAL)) }
            if n < 0 { if errno == EINTR || errno == EAGAIN { continue }; return false }
            off += n
        }
        return true
    }
}

/// Newline-delimited messages from the server.
struct HookLineReader {
    let fd: Int32
    private var pending: [UInt8] = []
    private(set) var failed = false
    init(fd: Int32) { self.fd = fd }

    mutating func next(deadline: Double) -> String? {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            if let nl = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeSubrange(...nl)
                return line
            }
            guard !failed, HookIO.ready(fd, Int16(POLLIN), deadline: deadline) else { return nil }
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if n <= 0 { failed = true; return nil }
            pending += buf[0..<n]
            // A server that streams notifications forever cannot grow this without bound.
            if pending.count > 64 << 20 { failed = true; return nil }
        }
    }
}

enum HookSocket {
    /// --socket, else $CODINGBRIDGE_SOCKET, else <state dir>/codingbridge.sock.
    static func path(option: String?) -> String {
        if let option, !option.isEmpty { return option }
        if let env = getenv("CODINGBRIDGE_SOCKET").map({ String(cString: $0) }), !env.isEmpty { return env }
        return ListenAddress.socketPath(stateDir: nil)
    }

    /// A connected, non-blocking stream socket, or why not.
    static func connect(_ path: String, deadline: Double) -> Result<Int32, HookError> {
        guard let addr = UnixSocket.address(path) else {
            return .failure(HookError("socket path is empty or longer than \(UnixSocket.maxPathBytes) bytes"))
        }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(HookError("socket(): \(String(cString: strerror(errno)))")) }
        var r = UnixSocket.connect(fd, to: addr)
        // Linux: a listener whose backlog is full refuses a non-blocking
        // connect with EAGAIN and queues nothing, so try again until the
        // deadline (polling such a socket reports it writable at once).
        while r != 0 && errno == EAGAIN && HookClock.remainingMs(deadline) > 0 {
            usleep(5_000)
            r = UnixSocket.connect(fd, to: addr)
        }
        if r == 0 { return .success(fd) }
        let e = errno
        if e == EAGAIN {
            close(fd)
            return .failure(HookError("connect timed out (the server's backlog stayed full)"))
        }
        if e == EINPROGRESS {
            guard HookIO.ready(fd, Int16(POLLOUT), deadline: deadline) else {
                close(fd)
                return .failure(HookError("connect timed out"))
            }
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err == 0 { return .success(fd) }
            close(fd)
            return .failure(HookError(String(cString: strerror(err))))
        }
        close(fd)
        return .failure(HookError(String(cString: strerror(e))))
    }
}

struct HookError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
