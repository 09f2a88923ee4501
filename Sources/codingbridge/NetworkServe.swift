import ArgumentParser
import BridgeCore
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

/// `serve --listen ws://...|wss://...`: the network listeners and the
/// listen.json that tells scripts, tests and `devices pair` where they are.
extension Serve {
    /// Plain text crosses only the loopback interface: anything else would
    /// carry tokens and approvals in clear.
    func checkPlainTextIsLoopback() throws {
        for case let n? in listen.map(\.network) where !n.tls && !n.isLoopback {
            fputs("codingbridge serve: ws://\(n.host) is not a loopback address: plain ws:// would carry tokens and approvals in clear. Use wss://\(n.host):\(n.port) (TLS), or ws://127.0.0.1 with an SSH tunnel or Tailscale.\n", stderr)
            throw ExitCode(2)
        }
        if (tlsCert == nil) != (tlsKey == nil) {
            fputs("codingbridge serve: --tls-cert and --tls-key go together\n", stderr)
            throw ExitCode(2)
        }
    }

    func listenOnNetwork(_ server: RPCServer, log: Logger) throws {
        var entries: [JSON] = []
        for case let n? in listen.map(\.network) {
            var config = NetworkListenConfig(host: n.host, port: n.port)
            var fingerprint: String?
            if n.tls {
                let (cert, key) = try tlsFiles(host: n.host, log: log)
                config.tlsCertificate = cert
                config.tlsKey = key
                fingerprint = try TLSFiles.sha256(certificate: cert)
            }
            config.allowedOrigins = allowOrigin
            config.serveHooks = n.isLoopback
            let l = try server.listen(network: config)
            let url = n.url(port: l.port)
            let hooks = config.serveHooks ? "; Claude Code http hooks at \(n.httpURL(port: l.port))/hooks/claude" : ""
            log.info("listening on \(url)\(fingerprint.map { " (certificate SHA-256 \($0))" } ?? "")\(hooks)")
            entries.append(["url": .string(url), "certSha256": fingerprint.map { .string($0) } ?? .null])
        }
        guard !entries.isEmpty else { return }
        if ephemeral { return log.info("--ephemeral: listen.json not written") }
        let dir = ListenAddress.stateDirectory(stateDir)
        try ListenAddress.ensurePrivateDirectory(dir, log: log)
        try ListenFile.write(entries, stateDir: dir)
    }

    /// --tls-cert/--tls-key, else the state directory's self-signed pair.
    private func tlsFiles(host: String, log: Logger) throws -> (String, String) {
        if let tlsCert, let tlsKey { return (tlsCert, tlsKey) }
        if ephemeral { throw ValidationError("wss:// with --ephemeral needs --tls-cert and --tls-key (no state directory to keep a certificate in)") }
        let dir = ListenAddress.stateDirectory(stateDir)
        try ListenAddress.ensurePrivateDirectory(dir, log: log)
        let cert = dir + "/tls-cert.pem", key = dir + "/tls-key.pem"
        try TLSFiles.ensureSelfSigned(certificate: cert, key: key, host: host)
        return (cert, key)
    }
}
