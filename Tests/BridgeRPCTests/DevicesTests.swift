import BridgeCore
@testable import BridgeRPC
import Glibc
import Testing

/// Device pairing, tokens, the gate of network connections, revocation and
/// the audit log, through in-process clients that stand for network peers.
@Suite struct DevicesTests {
    /// A client that sends one request at a time and returns its reply, the
    /// store's turn ended so replies held for a commit are out.
    final class Peer {
        let client: InProcessClient
        private var nextID: Int64 = 1
        init(_ client: InProcessClient) { self.client = client }
        var isOpen: Bool { client.connection.isOpen }

        func call(_ method: String, _ params: JSON = [:]) -> JSON? {
            let id = nextID
            nextID += 1
            var out = client.sendRequest(id, method, params)
            client.server.env.store?.flush()
            out += client.messages(client.takeOutput())
            return out.first { $0["id"] == .int(id) }
        }
        func result(_ method: String, _ params: JSON = [:], sourceLocation: SourceLocation = #_sourceLocation) -> JSON? {
            let r = call(method, params)
            #expect(r?["result"] != nil, "\(method): \(r?.serialized() ?? "no reply")", sourceLocation: sourceLocation)
            return r?["result"]
        }
    }

    final class Server {
        let server: RPCServer
        let local: Peer
        init(_ dir: TempStateDir) throws {
            server = try makeStoreServer(dir)
            local = Peer(server.makeInProcessClient())
            _ = local.result("initialize", ["deviceId": "laptop", "capabilities": ["notifications": false]])
        }
        func remote(_ address: String = "192.0.2.7:5000", bearer: String? = nil) -> Peer {
            Peer(server.makeInProcessClient(remote: RemotePeer(address: address, bearerToken: bearer)))
        }
        func code() -> String { local.result("device.pairingCode")?["code"]?.stringValue ?? "" }
        /// Pairs a device over the network; its id and token.
        func pair(_ name: String = "phone", from address: String = "192.0.2.7:5000") -> (id: String, token: String) {
            let r = remote(address).result("device.pair", ["code": .string(code()), "name": .string(name)])
            return (r?["deviceId"]?.stringValue ?? "", r?["token"]?.stringValue ?? "")
        }
        /// A network peer authenticated with `token`.
        func signedIn(_ token: String, address: String = "192.0.2.7:5000") -> Peer {
            let p = remote(address)
            _ = p.result("initialize", ["auth": ["token": .string(token)], "capabilities": ["notifications": false]])
            return p
        }
    }

    static func reason(_ reply: JSON?) -> String? { reply?["error"]?["data"]?["reason"]?.stringValue }
    static func code(_ reply: JSON?) -> Int64? { reply?["error"]?["code"]?.intValue }

    @Test func aPairedDeviceAuthenticatesWithItsTokenAndActsAsItself() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let (id, token) = s.pair()
        #expect(id.hasPrefix("dev-") && id.count == 20)
        #expect(token.count == 43)
        let phone = s.remote()
        let ini = phone.result("initialize", ["auth": ["token": .string(token)]])
        #expect(ini?["deviceId"]?.stringValue == id)
        #expect(phone.result("session.list") != nil)
        let listed = s.local.result("device.list")?["devices"]?.arrayValue?.first
        #expect(listed?["deviceId"]?.stringValue == id && listed?["name"] == "phone")
        #expect(listed?["connected"] == true && listed?["revoked"] == false)
        #expect(listed?["lastSeenAt"]?.intValue != nil)
    }

    @Test func theUpgradesBearerTokenAuthenticatesToo() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let (id, token) = s.pair()
        let phone = s.remote(bearer: token)
        #expect(phone.result("initialize")?["deviceId"]?.stringValue == id)
    }

    @Test func codesWithAndWithoutDashInAnyCaseWork() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let code = s.code()
        #expect(code.count == 11 && code.contains("-"))
        let typed = String(code.filter { $0 != "-" }).lowercased()
        #expect(s.remote().result("device.pair", ["code": .string(typed), "name": "tablet"])?["token"] != nil)
    }

    @Test func wrongExpiredAndReusedCodesAreRefused() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        #expect(Self.code(s.remote().call("device.pair", ["code": "AAAAA-AAAAA", "name": "x"])) == -32001)
        let code = s.code()
        #expect(s.remote().result("device.pair", ["code": .string(code), "name": "x"]) != nil)
        let reused = s.remote().call("device.pair", ["code": .string(code), "name": "y"])
        #expect(Self.code(reused) == -32001 && Self.reason(reused) == "unknown or already used pairing code")
        let late = s.code()
        _ = s.local.result("debug.advanceClock", ["ms": .int(DeviceRegistry.codeLifetimeMs)])
        let expired = s.remote().call("device.pair", ["code": .string(late), "name": "z"])
        #expect(Self.code(expired) == -32001 && Self.reason(expired) == "pairing code expired")
    }

    @Test func pairingCodesAreIssuedToLocalClientsOnly() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let (_, token) = s.pair()
        let r = s.signedIn(token).call("device.pairingCode")
        #expect(Self.code(r) == -32001)
    }

    @Test func anUnauthenticatedCallIsRefusedAndTheThirdFailureCloses() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let stranger = s.remote()
        let first = stranger.call("session.list")
        #expect(Self.code(first) == -32001 && first?["error"]?["message"] == "Unauthorized")
        #expect(Self.reason(first) != nil)
        #expect(Self.code(stranger.call("initialize", ["auth": ["token": "nope"]])) == -32001)
        #expect(stranger.isOpen)
        #expect(Self.code(stranger.call("device.pair", ["code": "AAAAA-AAAAA"])) == -32001)
        #expect(!stranger.isOpen, "the third failed attempt must close the connection")
    }

    @Test func wrongAndRevokedTokensAreRefusedAndRevokingClosesTheOpenConnection() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let (id, token) = s.pair()
        let wrong = s.remote().call("initialize", ["auth": ["token": "AAAA"]])
        #expect(Self.code(wrong) == -32001 && Self.reason(wrong) == "unknown token")
        let phone = s.signedIn(token)
        #expect(phone.isOpen)
        let r = s.local.result("device.revoke", ["deviceId": .string(id)])
        #expect(r?["closedConnections"]?.intValue == 1)
        #expect(!phone.isOpen, "revoking must close the device's open connection")
        let again = s.remote().call("initialize", ["auth": ["token": .string(token)]])
        #expect(Self.code(again) == -32001 && Self.reason(again) == "device revoked")
        #expect(s.local.result("device.list")?["devices"]?.arrayValue?.first?["revoked"] == true)
        let unknown = s.local.call("device.revoke", ["deviceId": "dev-0000000000000000"])
        #expect(Self.code(unknown) == -32011)
    }

    @Test func aDeviceMayRevokeAnotherAndItselfAfterItsReply() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let (tablet, tabletToken) = s.pair("tablet")
        let (phoneID, phoneToken) = s.pair("phone")
        let tab = s.signedIn(tabletToken), phone = s.signedIn(phoneToken)
        #expect(phone.result("device.revoke", ["deviceId": .string(tablet)]) != nil)
        #expect(!tab.isOpen && phone.isOpen)
        #expect(phone.result("device.revoke", ["deviceId": .string(phoneID)])?["closedConnections"]?.intValue == 1)
        #expect(!phone.isOpen)
    }

    @Test func failedAttemptsAreRateLimitedPerHost() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        for _ in 0..<10 { _ = s.remote("198.51.100.9:\(Int.random(in: 1000...60000))").call("device.pair", ["code": "AAAAA-AAAAA"]) }
        let limited = s.remote("198.51.100.9:4242").call("device.pair", ["code": .string(s.code()), "name": "x"])
        #expect(Self.code(limited) == -32001 && Self.reason(limited) == "rate limited")
        #expect(Self.reason(s.remote("198.51.100.9:4243").call("initialize", ["auth": ["token": "x"]])) == "rate limited")
        // Another host is not held back; the window passes.
        #expect(s.remote("203.0.113.5:1").result("device.pair", ["code": .string(s.code())]) != nil)
        _ = s.local.result("debug.advanceClock", ["ms": 60_000])
        #expect(s.remote("198.51.100.9:4244").result("device.pair", ["code": .string(s.code())]) != nil)
        #expect(FailureLimiter.host(of: "[2001:db8::1]:443") == "2001:db8::1")
    }

    @Test func anAuthenticatedDeviceCannotNameAnotherDevice() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let (id, token) = s.pair()
        let wrongID = s.remote().call("initialize", ["auth": ["token": .string(token)], "deviceId": "someone-else"])
        #expect(Self.code(wrongID) == -32602)
        let phone = s.signedIn(token)
        _ = s.local.result("agent.event", ["sessionId": "s1", "type": "approval_request", "requestId": "r1",
                                           "toolName": "Bash", "input": ["command": "make"]])
        let r = phone.call("approval.respond", ["requestId": "r1", "decision": "allow", "deviceId": "laptop"])
        #expect(Self.code(r) == -32602)
        #expect(phone.result("approval.respond", ["requestId": "r1", "decision": "allow", "deviceId": .string(id)])?["status"] == "accepted")
    }

    @Test func decisionsPairingsAndRevocationsAreAuditedWithDeviceAndAddress() throws {
        let dir = TempStateDir("cb-devices"), s = try Server(dir)
        let (id, token) = s.pair()
        let phone = s.signedIn(token)
        _ = s.local.result("agent.event", ["sessionId": "s1", "type": "approval_request", "requestId": "r1",
                                           "toolName": "Bash", "input": ["command": "make"]])
        _ = phone.result("approval.respond", ["requestId": "r1", "decision": "deny"])
        _ = s.local.result("device.revoke", ["deviceId": .string(id)])
        let entries = s.local.result("audit.list")?["entries"]?.arrayValue ?? []
        #expect(entries.map { $0["kind"]?.stringValue ?? "" } == ["device.pair", "approval.decision", "device.revoke"])
        let decision = entries.first { $0["kind"] == "approval.decision" }
        #expect(decision?["deviceId"]?.stringValue == id)
        #expect(decision?["address"] == "192.0.2.7:5000" && decision?["connection"] == "memory")
        #expect(decision?["detail"]?["decision"] == "deny" && decision?["detail"]?["requestId"] == "r1")
        let revoke = entries.last
        #expect(revoke?["deviceId"] == "laptop" && revoke?["address"] == .null)
        #expect(revoke?["detail"]?["revokedDeviceId"]?.stringValue == id)
        let page = s.local.result("audit.list", ["afterId": entries[0]["id"]!, "limit": 1])
        #expect(page?["entries"]?.arrayValue?.first?["kind"] == "approval.decision")
        #expect(page?["nextAfterId"] == entries[1]["id"])
        #expect(Self.code(s.local.call("audit.list", ["limit": 1001])) == -32602)
    }

    @Test func underEphemeralTheAuditLogIsKeptInMemoryAndHoldsNoReplyBack() throws {
        var o = ServerOptions()
        o.ephemeral = true
        o.manualClock = true
        o.logLevel = .error
        let server = try RPCServer(env: ServerEnvironment(loop: EventLoop(), options: o))
        let c = server.makeInProcessClient()
        _ = c.request("initialize", ["deviceId": "laptop"])
        _ = c.request("agent.event", ["sessionId": "s1", "type": "approval_request", "requestId": "r1", "toolName": "Bash"])
        // No loop turn ends here: the reply must not wait for a commit.
        let r = c.request("approval.respond", ["requestId": "r1", "decision": "allow"]).first { $0["id"] != nil }
        #expect(r?["result"]?["status"] == "accepted")
        let entries = c.request("audit.list").first { $0["id"] != nil }?["result"]?["entries"]?.arrayValue
        #expect(entries?.first?["kind"] == "approval.decision" && entries?.first?["deviceId"] == "laptop")
    }

    @Test func aDeviceSurvivesARestartAndOnlyItsTokenHashIsStored() throws {
        let dir = TempStateDir("cb-devices")
        var paired: (id: String, token: String) = ("", "")
        do {
            let s = try Server(dir)
            paired = s.pair()
            s.server.env.store?.flush()
        }
        let s = try Server(dir)
        #expect(s.signedIn(paired.token).result("session.list") != nil)
        #expect(s.local.result("device.list")?["devices"]?.arrayValue?.first?["deviceId"]?.stringValue == paired.id)
        s.server.env.store?.flush()
        // The row may still be in the WAL: look at both files.
        let bytes = Self.read(dir.path + "/codingbridge.db") + Self.read(dir.path + "/codingbridge.db-wal")
        #expect(Self.contains(bytes, Array(Secrets.sha256Hex(paired.token).utf8)), "the token's hash is not stored")
        #expect(!Self.contains(bytes, Array(paired.token.utf8)), "the token itself is stored")
    }

    static func read(_ path: String) -> [UInt8] {
        guard let f = fopen(path, "rb") else { return [] }
        defer { fclose(f) }
        var out: [UInt8] = [], buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return out
    }

    static func contains(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= hay.count, let first = needle.first else { return false }
        var i = 0
        while i + needle.count <= hay.count {
            if hay[i] == first && Array(hay[i..<(i + needle.count)]) == needle { return true }
            i += 1
        }
        return false
    }
}
