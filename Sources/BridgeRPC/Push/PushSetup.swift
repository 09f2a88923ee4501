import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// Why push could not be set up (a key file that is not a P-256 key, a
/// subject that is no mailto: or https: URL): `serve` stops with it.
public struct PushSetupError: Error, CustomStringConvertible {
    public let description: String
    init(_ d: String) { description = d }
}

/// Checks `serve` makes before starting, shared with the server's own.
public enum PushSettings {
    /// A contact a push service accepts: mailto:someone@host or an https:// URL.
    public static func isVAPIDSubject(_ s: String) -> Bool {
        if s.hasPrefix("https://") { return s.count > "https://".count }
        guard s.hasPrefix("mailto:") else { return false }
        let address = s.dropFirst("mailto:".count).split(separator: "@", omittingEmptySubsequences: false)
        return address.count == 2 && !address[0].isEmpty && !address[1].isEmpty
    }
}

extension ServerEnvironment {
    static let pushConfigFile = "push.json"
    static let vapidKeyFile = "vapid-key.pem"

    /// The push registrations, the durable queue (what a previous run left
    /// is sent again), APNs when configured (options, else
    /// `<state dir>/push.json`), and the Web Push key (created once in the
    /// state directory; Web Push sends only with a subject).
    func startPush(_ store: Store, directory dir: String?) throws {
        let registry = try PushRegistry(store: store)
        let queue = try PushQueue(store: store, scheduler: scheduler, registry: registry, metrics: PushMetrics(), log: log)
        let service = PushService(registry: registry, queue: queue, router: router, scheduler: scheduler, log: log,
                                  coalesceMs: options.pushCoalesceMs)
        let file = try dir.flatMap { try Self.readPushConfig($0 + "/" + Self.pushConfigFile) } ?? [:]
        let wallClock = { [unowned scheduler] in scheduler.wallClockMs }
        if let config = try options.apns ?? Self.apnsConfig(file) {
            let pem = try Self.readFile(config.keyFile, what: "--apns-key")
            let key: ES256Key
            do { key = try ES256Key(pem: pem) } catch { throw PushSetupError("--apns-key \(config.keyFile): \(error)") }
            let loop = self.loop
            queue.senders[.apns] = APNsSender(config: config, key: key, nowMs: wallClock, log: log) {
                try HTTP2Client(loop: loop, caFile: config.caFile)
            }
            service.apnsEnabled = true
            log.info("push: APNs for \(config.topic) (key \(config.keyId), team \(config.teamId))\(config.endpoint.map { " at " + $0 } ?? "")")
        }
        let vapid = try loadOrCreateVAPIDKey(dir)
        service.vapidPublicKey = Base64URL.encode(vapid.publicKeyRaw)
        if let subject = options.vapidSubject ?? file["vapidSubject"]?.stringValue {
            guard PushSettings.isVAPIDSubject(subject) else {
                throw PushSetupError("--vapid-subject '\(subject)': must be mailto:you@example.org or an https:// URL")
            }
            queue.senders[.webpush] = WebPushSender(key: vapid, subject: subject, nowMs: wallClock,
                                                    client: try HTTP2Client(loop: loop, caFile: options.webPushCAFile))
            service.webPushEnabled = true
            log.info("push: Web Push as \(subject)")
        }
        push = service
        queue.start()
    }

    private static func apnsConfig(_ f: [String: JSON]) throws -> APNsConfig? {
        let names = ["apnsKey", "apnsKeyId", "apnsTeamId", "apnsTopic"]
        let values = names.map { f[$0]?.stringValue }
        if values.allSatisfy({ $0 == nil }) { return nil }
        guard let k = values[0], let id = values[1], let team = values[2], let topic = values[3] else {
            throw PushSetupError("\(pushConfigFile): APNs needs all of \(names.joined(separator: ", "))")
        }
        var c = APNsConfig(keyFile: k, keyId: id, teamId: team, topic: topic)
        c.endpoint = f["apnsEndpoint"]?.stringValue
        c.caFile = f["apnsCA"]?.stringValue
        return c
    }

    private static func readPushConfig(_ path: String) throws -> [String: JSON]? {
        guard access(path, F_OK) == 0 else { return nil }
        guard let o = JSON.parse(try readFile(path, what: pushConfigFile))?.objectValue else {
            throw PushSetupError("\(path): not a JSON object")
        }
        return o
    }

    static func readFile(_ path: String, what: String) throws -> String {
        guard let f = fopen(path, "rb") else { throw PushSetupError("\(what) \(path): \(String(cString: strerror(errno)))") }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
            if out.count > 1 << 20 { throw PushSetupError("\(what) \(path): larger than 1 MiB") }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `<dir>/vapid-key.pem`, made once (0600); in memory with --ephemeral.
    /// Written whole to a temporary file and linked into place, so a crash
    /// never leaves half a key and two servers starting at once keep the
    /// first one linked.
    private func loadOrCreateVAPIDKey(_ dir: String?) throws -> ES256Key {
        guard let dir else { return try ES256Key.generate() }
        let path = dir + "/" + Self.vapidKeyFile
        if access(path, F_OK) != 0 {
            let key = try ES256Key.generate()
            do { try SecretFile.writeNew(path, Array(key.privatePEM.utf8), directory: dir) } catch {
                throw PushSetupError("\(error)")
            }
            if access(path, F_OK) == 0 { log.info("push: made the Web Push (VAPID) key \(path)") }
        }
        do { return try ES256Key(pem: try Self.readFile(path, what: "VAPID key")) } catch {
            throw PushSetupError("\(path): \(error) (delete it to make a new key; browsers then subscribe again)")
        }
    }
}
