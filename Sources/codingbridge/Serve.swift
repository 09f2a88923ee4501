import ArgumentParser
import BridgeCore
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the JSON-RPC 2.0 server on stdin/stdout and, with --listen, a unix socket or the network.",
        discussion: """
        Framing is detected from the first bytes the client sends: LSP base protocol \
        ('Content-Length: N' headers, blank line, N bytes) or newline-delimited JSON \
        (one message per line). Replies use the client's framing. stdout carries \
        protocol only; logs go to stderr.

        Lifecycle: initialize -> initialized -> ... -> shutdown -> exit (exit code 0 \
        after shutdown, else 1). EOF on stdin, SIGTERM or SIGINT flush pending output \
        and exit 0. 'rpc.discover' returns the OpenRPC document.

        A client that stops reading its replies: once 4 MiB of replies are queued \
        the server stops reading that client's input until the queue drains below \
        1 MiB, so memory stays bounded.

        Many devices (--listen): every client of the unix socket is its own \
        connection with its own framing, lifecycle (initialize per client; its \
        deviceId, else a generated one; shutdown/exit end that client only) and \
        output queue; all see the same state. 'unix' alone means \
        <state dir>/codingbridge.sock (directory 0700); the socket is 0600. A \
        socket left by a dead server is replaced; one a live server holds is \
        refused. With listeners, the end of stdin does not stop the server; run \
        it as a daemon with --no-stdio. SIGTERM/SIGINT flush, remove the socket \
        and exit 0. A client (socket or stdio) that leaves more than 256 KiB unread \
        gets no notifications until it reads, and is disconnected if it takes \
        nothing for --slow-client-timeout seconds (for stdio: the end of input).

        The network (--listen ws://HOST:PORT or wss://HOST:PORT): JSON-RPC over \
        WebSocket text frames at /rpc, and Claude Code http hooks at \
        /hooks/claude on a loopback listener. Plain ws:// is for loopback only; \
        elsewhere use wss:// (--tls-cert/--tls-key, else a self-signed \
        certificate kept in the state directory, whose SHA-256 `devices pair` \
        shows). PORT 0 picks a free port. Bound addresses are logged and written \
        to <state dir>/listen.json. Network clients must pair first \
        (`codingbridge devices pair`); a browser's Origin must be the listener's \
        own or one given with --allow-origin.

        Examples:
          echo '{"jsonrpc":"2.0","id":1,"method":"ping"}' | codingbridge serve
          codingbridge serve --listen unix --no-stdio   # a daemon
          codingbridge serve --listen unix --listen ws://127.0.0.1:8765 --no-stdio

        Push (devices that are not connected, or whose app is in the background): \
        APNs with --apns-key/--apns-key-id/--apns-team-id/--apns-topic (or the keys \
        apnsKey, apnsKeyId, apnsTeamId, apnsTopic in <state dir>/push.json); Web \
        Push with --vapid-subject (the VAPID key is created once in \
        <state dir>/vapid-key.pem).
        """
    )

    @Option(name: .long, parsing: .unconditional, help: "Largest message accepted, in bytes, in [64, 1073741824]; bigger ones get an error and are skipped.")
    var maxMessageBytes: Int = 16 << 20

    @Flag(name: .long, help: "Time advances only through debug.advanceClock (tests, demos).")
    var manualClock = false

    @Option(name: .long, help: ArgumentHelp("Where --manual-clock starts: Unix ms or UTC date-time YYYY-MM-DDTHH:MM:SSZ (default 2026-01-01T00:00:00Z). A restart with a later start sees the deadlines that passed while it was down.", valueName: "time"))
    var manualClockStart: String?

    @Option(name: .long, help: "Directory for durable state (default: $XDG_STATE_HOME/codingbridge or ~/.local/state/codingbridge).")
    var stateDir: String?

    @Flag(name: .long, help: "Keep all state in memory; nothing is written to disk.")
    var ephemeral = false

    @Option(name: .long, help: "stderr verbosity: error, warn, info or debug.")
    var logLevel: String = "info"

    @Option(name: .long, help: ArgumentHelp("Also serve clients on a unix socket: unix:PATH, or unix for <state dir>/codingbridge.sock. Repeatable.", valueName: "unix[:PATH]"))
    var listen: [ListenAddress] = []

    @Option(name: .long, help: ArgumentHelp("wss:// certificate (PEM); default: a self-signed one generated once in the state directory.", valueName: "file"))
    var tlsCert: String?

    @Option(name: .long, help: ArgumentHelp("wss:// private key (PEM), with --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @Option(name: .long, help: ArgumentHelp("A browser origin allowed to connect besides the listener's own, e.g. https://app.example. Repeatable.", valueName: "origin"))
    var allowOrigin: [String] = []

    @Option(name: .long, parsing: .unconditional, help: "Seconds a network client may stay connected without authenticating as a paired device, in (0, 3600].")
    var authTimeout: Double = 30

    @Flag(name: .long, help: "A hook's PermissionRequest waits for a decision even when nobody can answer it (no other client connected, no push registration); by default the hook then returns at once and Claude Code asks in its own prompt.")
    var alwaysWaitForApproval = false

    @Option(name: .long, help: ArgumentHelp("What resumes an ended Claude Code session when a device sends it a message: run as CMD --resume=SESSION -p -- TEXT in the session's directory. 'none': never resume (the message waits for the session's next Stop).", valueName: "command"))
    var resumeCommand: String = "claude"

    @Flag(name: .long, help: "Do not serve stdin/stdout (a daemon; needs --listen).")
    var noStdio = false

    @Option(name: .long, parsing: .unconditional, help: "Seconds a client may leave over 256 KiB unread without reading anything before it is disconnected, in (0, 86400].")
    var slowClientTimeout: Double = 30

    @OptionGroup(title: "Push to phones and browsers")
    var push: PushOptions

    func validate() throws {
        try OptionRange.check("--max-message-bytes", maxMessageBytes, 64...(1 << 30), unit: "bytes")
        guard LogLevel(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of: \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if ephemeral && stateDir != nil { throw ValidationError("--ephemeral and --state-dir exclude each other") }
        if noStdio && listen.isEmpty { throw ValidationError("--no-stdio needs --listen (nothing else to serve)") }
        if ephemeral && listen.contains(where: { $0.path == nil && $0.network == nil }) {
            throw ValidationError("--listen unix without a path needs the state directory; with --ephemeral give one: --listen unix:PATH")
        }
        try OptionRange.check("--auth-timeout", authTimeout, 0, 3600, unit: "seconds")
        try OptionRange.check("--slow-client-timeout", slowClientTimeout, 0, 86_400, unit: "seconds")
        try push.check()
        if let s = manualClockStart {
            guard manualClock else { throw ValidationError("--manual-clock-start needs --manual-clock") }
            guard Self.unixMs(s) != nil else {
                throw ValidationError("--manual-clock-start: '\(s)' is neither Unix milliseconds nor a valid UTC date-time YYYY-MM-DDTHH:MM:SSZ, up to the year 9999")
            }
        }
    }

    func run() throws {
        var options = ServerOptions()
        options.maxMessageBytes = maxMessageBytes
        options.manualClock = manualClock
        if let s = manualClockStart, let ms = Self.unixMs(s) { options.manualClockStartMs = ms }
        options.stateDirectory = stateDir
        options.ephemeral = ephemeral
        options.alwaysWaitForApproval = alwaysWaitForApproval
        options.resumeCommand = resumeCommand == "none" || resumeCommand.isEmpty ? nil : resumeCommand
        options.logLevel = LogLevel(rawValue: logLevel) ?? .info
        push.apply(to: &options)
        let loop = EventLoop()
        let env = ServerEnvironment(loop: loop, options: options)
        let code: Int32
        do {
            try checkPlainTextIsLoopback()
            let paths = try listen.filter { $0.network == nil }
                .map { try $0.resolve(stateDir: stateDir, ephemeral: ephemeral, log: env.log) }
            let server = try RPCServer(env: env)
            server.policy.stallTimeoutMs = UInt64(slowClientTimeout * 1000)
            server.authDeadlineMs = UInt64(authTimeout * 1000)
            if !listen.isEmpty { raiseOpenFileLimit() }
            for p in paths { try server.listen(unixPath: p) }
            try listenOnNetwork(server, log: env.log)
            code = try server.serve(stdio: !noStdio)
        } catch let e as ExitCode {
            throw e
        } catch {
            env.log.error("cannot serve: \(error)")
            throw ExitCode(2)
        }
        // exit() here skips teardown that could block on a vanished peer.
        Glibc.exit(code)
    }

    /// Unix ms from "1767225600000" or "2026-01-01T00:00:00Z" (UTC only: a
    /// test clock should not depend on the machine's time zone).
    static func unixMs(_ s: String) -> Int64? {
        // Up to 9999-12-31T23:59:59.999Z: the engine adds hours and days to
        // the clock, which must not overflow.
        let maxMs: Int64 = 253_402_300_799_999
        if let ms = Int64(s) { return (0...maxMs).contains(ms) ? ms : nil }
        let b = Array(s.utf8)
        guard b.count == 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54, b[13] == 0x3A, b[16] == 0x3A, b[19] == 0x5A else { return nil }
        func num(_ r: Range<Int>) -> Int32? {
            var v: Int32 = 0
            for i in r { guard (0x30...0x39).contains(b[i]) else { return nil }; v = v * 10 + Int32(b[i] - 0x30) }
            return v
        }
        guard let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13),
              let mi = num(14..<16), let sec = num(17..<19),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 60 else { return nil }
        var t = tm()
        t.tm_year = y - 1900; t.tm_mon = mo - 1; t.tm_mday = d
        t.tm_hour = h; t.tm_min = mi; t.tm_sec = sec
        var secs = timegm(&t)
        // timegm normalises 2026-02-31 to March 3rd: such a date is refused.
        var back = tm()
        guard secs >= 0, gmtime_r(&secs, &back) != nil, back.tm_mon == mo - 1, back.tm_mday == d else { return nil }
        return Int64(secs) * 1000
    }
}
