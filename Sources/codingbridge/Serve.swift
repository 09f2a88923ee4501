import ArgumentParser
import BridgeCore
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the JSON-RPC 2.0 server on stdin/stdout.",
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

        Example:
          echo '{"jsonrpc":"2.0","id":1,"method":"ping"}' | codingbridge serve
        """
    )

    @Option(name: .long, help: "Largest message accepted, in bytes; bigger ones get an error and are skipped.")
    var maxMessageBytes: Int = 16 << 20

    @Flag(name: .long, help: "Time advances only through debug.advanceClock (tests, demos).")
    var manualClock = false

    @Option(name: .long, help: "Directory for durable state (default: $XDG_STATE_HOME/codingbridge or ~/.local/state/codingbridge).")
    var stateDir: String?

    @Flag(name: .long, help: "Keep all state in memory; nothing is written to disk.")
    var ephemeral = false

    @Option(name: .long, help: "stderr verbosity: error, warn, info or debug.")
    var logLevel: String = "info"

    func validate() throws {
        guard maxMessageBytes >= 64 else { throw ValidationError("--max-message-bytes must be at least 64") }
        guard LogLevel(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of: \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if ephemeral && stateDir != nil { throw ValidationError("--ephemeral and --state-dir exclude each other") }
    }

    func run() throws {
        var options = ServerOptions()
        options.maxMessageBytes = maxMessageBytes
        options.manualClock = manualClock
        options.stateDirectory = stateDir
        options.ephemeral = ephemeral
        options.logLevel = LogLevel(rawValue: logLevel) ?? .info
        Log.level = options.logLevel
        let loop = EventLoop()
        let env = ServerEnvironment(loop: loop, options: options)
        let code: Int32
        do {
            let server = try RPCServer(env: env)
            code = try server.serveStdio()
        } catch {
            Log.error("cannot serve: \(error)")
            throw ExitCode(2)
        }
        // exit() here skips teardown that could block on a vanished peer.
        Glibc.exit(code)
    }
}
