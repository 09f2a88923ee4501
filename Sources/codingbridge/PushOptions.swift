import ArgumentParser
import BridgeRPC

/// `serve`'s push options: APNs token auth, Web Push's VAPID subject, and
/// where a test service is.
struct PushOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("APNs auth key (.p8, from Apple's developer account: Keys).", valueName: "file"))
    var apnsKey: String?

    @Option(name: .long, help: ArgumentHelp("The key's 10-character Key ID.", valueName: "id"))
    var apnsKeyId: String?

    @Option(name: .long, help: ArgumentHelp("Your Apple developer Team ID.", valueName: "id"))
    var apnsTeamId: String?

    @Option(name: .long, help: ArgumentHelp("The iOS app's bundle id (apns-topic).", valueName: "bundle-id"))
    var apnsTopic: String?

    @Option(name: .long, help: ArgumentHelp("Send APNs requests here instead of Apple's hosts, for both environments (a test server).", valueName: "url"))
    var apnsEndpoint: String?

    @Option(name: .long, help: ArgumentHelp("Trust this CA (PEM) for --apns-endpoint.", valueName: "file"))
    var apnsCa: String?

    @Option(name: .long, help: ArgumentHelp("Enables Web Push: the contact push services see, mailto:you@example.org or an https:// URL.", valueName: "uri"))
    var vapidSubject: String?

    @Option(name: .long, help: ArgumentHelp("Trust this CA (PEM) for Web Push services (a test service).", valueName: "file"))
    var webPushCa: String?

    @Option(name: .long, parsing: .unconditional, help: "Live Activity progress pushes: at most one per this many seconds per activity, in (0, 3600].")
    var pushCoalesce: Double = 5

    func check() throws {
        let apns = [apnsKey, apnsKeyId, apnsTeamId, apnsTopic]
        if apns.contains(where: { $0 != nil }) && apns.contains(where: { $0 == nil }) {
            throw ValidationError("APNs needs all four of --apns-key, --apns-key-id, --apns-team-id and --apns-topic")
        }
        if (apnsEndpoint != nil || apnsCa != nil) && apnsKey == nil {
            throw ValidationError("--apns-endpoint and --apns-ca need --apns-key")
        }
        if apnsCa != nil && apnsEndpoint == nil {
            throw ValidationError("--apns-ca needs --apns-endpoint (Apple's hosts are checked against the system's CAs)")
        }
        if let e = apnsEndpoint, !(e.hasPrefix("https://") || e.hasPrefix("http://")) || e.utf8.count > 2048 {
            throw ValidationError("--apns-endpoint '\(e)' must be an https:// URL")
        }
        if let s = vapidSubject, !PushSettings.isVAPIDSubject(s) {
            throw ValidationError("--vapid-subject '\(s)' must be mailto:you@example.org or an https:// URL")
        }
        try OptionRange.check("--push-coalesce", pushCoalesce, 0, 3600, unit: "seconds")
    }

    func apply(to o: inout ServerOptions) {
        if let k = apnsKey, let id = apnsKeyId, let team = apnsTeamId, let topic = apnsTopic {
            var c = APNsConfig(keyFile: k, keyId: id, teamId: team, topic: topic)
            c.endpoint = apnsEndpoint
            c.caFile = apnsCa
            o.apns = c
        }
        o.vapidSubject = vapidSubject
        o.webPushCAFile = webPushCa
        o.pushCoalesceMs = Int64(pushCoalesce * 1000)
    }
}
