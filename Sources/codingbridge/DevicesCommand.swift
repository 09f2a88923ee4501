import ArgumentParser
import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// `codingbridge devices pair|list|revoke`: device pairing from the machine
/// the daemon runs on (a local client is trusted; pairing codes are issued
/// to local clients only). Exit codes: 0 ok, 1 failure (no daemon, refused),
/// 2 usage.
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "Pair, list and revoke the devices (phones, browsers) that may connect over the network.",
        discussion: "Talks to the running daemon over its unix socket. Exit codes: 0 ok, 1 failure, 2 usage.",
        subcommands: [Pair.self, List.self, Revoke.self]
    )

    struct Daemon: ParsableArguments {
        @Option(name: .long, help: "The daemon's --state-dir (its socket and listen.json live there).")
        var stateDir: String?
        @Option(name: .long, help: "The daemon's unix socket (default: $CODINGBRIDGE_SOCKET, else <state dir>/codingbridge.sock).")
        var socket: String?

        func connect() throws -> DaemonClient {
            signal(SIGPIPE, SIG_IGN)
            let path = HookSocket.path(option: socket ?? stateDir.map { ListenAddress.socketPath(stateDir: $0) })
            do { return try DaemonClient(path: path) } catch { throw fail(error) }
        }
    }

    struct Pair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a one-time pairing code (5 minutes), the URL to open on the device and its QR code.")
        @OptionGroup var daemon: Daemon
        @Option(name: .long, help: "The new device's name in `devices list`.")
        var name: String?

        func run() throws {
            var client = try daemon.connect()
            defer { client.close() }
            let params: JSON = name.map { ["name": .string($0)] } ?? [:]
            let r: JSON
            do { r = try client.call("device.pairingCode", params) } catch { throw fail(error) }
            let code = r["code"]?.stringValue ?? ""
            print("Pairing code: \(code)  (valid 5 minutes, single use)")
            guard let listen = PairingURL.firstListener(stateDir: ListenAddress.stateDirectory(daemon.stateDir)) else {
                print("The daemon has no network listener (no listen.json): type the code in the app, or restart "
                      + "`codingbridge serve` with a network --listen.")
                return
            }
            let url = listen.base + "/#pair=" + code
            print("Open on the device: \(url)\n")
            if let qr = TerminalQR.render(url) { print(qr) }
            if let cert = listen.certSha256 { print("Certificate SHA-256 (check it on the device): \(cert)") }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List paired devices.")
        @OptionGroup var daemon: Daemon
        @Flag(name: .long, help: "Print device.list's JSON result.")
        var json = false

        func run() throws {
            var client = try daemon.connect()
            defer { client.close() }
            let r: JSON
            do { r = try client.call("device.list") } catch { throw fail(error) }
            if json { return print(r.serialized()) }
            let devices = r["devices"]?.arrayValue ?? []
            guard !devices.isEmpty else { return print("No paired devices. Pair one with `codingbridge devices pair`.") }
            for d in devices {
                let status = d["revoked"] == .bool(true) ? "revoked" : d["connected"] == .bool(true) ? "connected" : "paired"
                let seen = d["lastSeenAt"]?.intValue.map(Self.time) ?? "never"
                print("\(d["deviceId"]?.stringValue ?? "?")  \(status)  paired \(d["createdAt"]?.intValue.map(Self.time) ?? "?")  "
                      + "last seen \(seen)  \(d["name"]?.stringValue ?? "")")
            }
        }

        /// Unix ms as UTC "2026-01-01 12:00:00Z".
        static func time(_ ms: Int64) -> String {
            var t = time_t(ms / 1000), tm = tm()
            gmtime_r(&t, &tm)
            var buf = [CChar](repeating: 0, count: 32)
            strftime(&buf, buf.count, "%Y-%m-%d %H:%M:%SZ", &tm)
            return String(cString: buf)
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a device: its token stops working and its open connections close at once.")
        @OptionGroup var daemon: Daemon
        @Argument(help: "The device's id (from `devices list`).")
        var id: String

        func run() throws {
            var client = try daemon.connect()
            defer { client.close() }
            let r: JSON
            do { r = try client.call("device.revoke", ["deviceId": .string(id)]) } catch { throw fail(error) }
            print("Revoked \(id) (\(r["closedConnections"]?.intValue ?? 0) open connection(s) closed).")
        }
    }
}

/// Prints `error` and gives exit code 1.
private func fail(_ error: Error) -> ExitCode {
    HookIO.stderr("codingbridge devices: \(error)")
    return ExitCode(1)
}

/// Where a device opens the web app to pair: from the daemon's listen.json
/// ({"listen": [{"url": "ws://127.0.0.1:41234", "certSha256": null}]}).
enum PairingURL {
    struct Listener {
        /// http(s)://host:port of the first network listener.
        var base: String
        var certSha256: String?
    }

    /// The first listener a phone can reach: loopback ones only when there
    /// is nothing else, and a wildcard address (0.0.0.0, ::) replaced by
    /// this machine's first address on a real interface.
    static func firstListener(stateDir: String) -> Listener? {
        guard let entries = try? ListenFile.read(stateDir: stateDir),
              var pick = entries.first(where: { !$0.address.isLoopback }) ?? entries.first else { return nil }
        if pick.address.host == "0.0.0.0" || pick.address.host == "::", let here = externalAddress() { pick.address.host = here }
        return Listener(base: pick.address.httpURL(port: pick.address.port), certSha256: pick.certSha256)
    }

    /// The first IPv4 address of an interface that is up and not loopback.
    private static func externalAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return nil }
        defer { freeifaddrs(list) }
        var p = list
        while let a = p?.pointee {
            defer { p = a.ifa_next }
            let up = a.ifa_flags & UInt32(IFF_UP) != 0, loop = a.ifa_flags & UInt32(IFF_LOOPBACK) != 0
            guard up, !loop, let sa = a.ifa_addr, sa.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var buf = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            var sin = UnsafeRawPointer(sa).load(as: sockaddr_in.self).sin_addr
            guard inet_ntop(AF_INET, &sin, &buf, socklen_t(buf.count)) != nil else { continue }
            return String(cString: buf)
        }
        return nil
    }
}
