import Testing
@testable import BridgeCore

/// RFC 8291 Appendix A ("Intermediate Values for Encryption") and the
/// section 5 example it explains: the published inputs and the message they
/// must produce, base64url with the RFC's line wrapping removed.
private enum RFC8291 {
    static let plaintext = "When I grow up, I want to be a watermelon"
    static let plaintextB64 = "V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24"
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    /// salt | rs = 4096 | idlen = 65 | as_public: the 86-octet header.
    static let header = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let ciphertext = "8pfeW0KbunFT06SuDKoJH9Ql87S1QUrdirN6GcG7sFz1y1sqLgVi1VhjVkHsUoEsbI_0LpXMuGvnzQ"
    /// The section 5 request body: header then ciphertext.
    static let body = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml"
        + "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT"
        + "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
}

private func b64(_ s: String) -> [UInt8] { Base64URL.decode(s)! }

/// DER and PEM built at test time, so no key text sits in the repository.
private enum DER {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let n = content.count
        let len: [UInt8] = n < 128 ? [UInt8(n)] : n < 256 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 255)]
        return [tag] + len + content
    }
    static func seq(_ parts: [UInt8]...) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }
    static func int(_ v: Int) -> [UInt8] {
        var b: [UInt8] = []
        var x = v
        repeat { b.insert(UInt8(x & 255), at: 0); x >>= 8 } while x > 0
        if b[0] & 0x80 != 0 { b.insert(0, at: 0) }
        return tlv(0x02, b)
    }
    static func octets(_ b: [UInt8]) -> [UInt8] { tlv(0x04, b) }
    static let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    static let p384: [UInt8] = [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]
    static let ecPublicKey: [UInt8] = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    static let ed25519: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70]

    /// SEC1 ECPrivateKey with the curve named, no public key (OpenSSL derives it).
    static func sec1(curve: [UInt8], scalar: [UInt8]) -> [UInt8] {
        seq(int(1), octets(scalar), tlv(0xA0, curve))
    }
    /// PKCS#8 PrivateKeyInfo around a SEC1 key, the layout of an Apple .p8 file.
    static func pkcs8EC(curve: [UInt8], scalar: [UInt8]) -> [UInt8] {
        seq(int(0), seq(ecPublicKey, curve), octets(seq(int(1), octets(scalar))))
    }
    static func pkcs8Ed25519(seed: [UInt8]) -> [UInt8] { seq(int(0), seq(ed25519), octets(octets(seed))) }
    /// The textbook RSA key (n = 61 * 53 = 3233, e = 17, d = 2753): it parses as
    /// RSA, so refusing it tests the key type check, not the parser.
    static let toyRSA = seq(int(0), int(3233), int(17), int(2753), int(61), int(53), int(53), int(49), int(38))

    static func pem(_ label: String, _ der: [UInt8]) -> String {
        let b = Base64URL.encode(der).map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 }
        var text = String(b) + String(repeating: "=", count: (4 - b.count % 4) % 4)
        var lines: [String] = []
        while !text.isEmpty { lines.append(String(text.prefix(64))); text = String(text.dropFirst(64)) }
        let dashes = "-----"
        return "\(dashes)BEGIN \(label)\(dashes)\n" + lines.joined(separator: "\n") + "\n\(dashes)END \(label)\(dashes)\n"
    }
}

/// The scalar 7 as a big-endian private key of `bytes` bytes.
private func scalarSeven(_ bytes: Int) -> [UInt8] { [UInt8](repeating: 0, count: bytes - 1) + [7] }

@Suite("Push crypto")
struct PushCryptoTests {
    // MARK: Web Push (RFC 8291)

    @Test func rfc8291AppendixAByteForByte() throws {
        let server = try ES256Key(rawPrivateKey: b64(RFC8291.asPrivate))
        #expect(server.publicKeyRaw == b64(RFC8291.asPublic))
        #expect(Array(RFC8291.plaintext.utf8) == b64(RFC8291.plaintextB64))
        let body = try WebPushCrypto.encrypt(
            uaPublic: b64(RFC8291.uaPublic), authSecret: b64(RFC8291.authSecret),
            plaintext: Array(RFC8291.plaintext.utf8), serverKey: server, salt: b64(RFC8291.salt))
        #expect(body == b64(RFC8291.body))
        #expect(body.count == 144)
        #expect(Array(body[..<86]) == b64(RFC8291.header))
        #expect(Array(body[86...]) == b64(RFC8291.ciphertext))
        #expect(Base64URL.encode(body) == RFC8291.body)
    }

    @Test func rfc8291MessageOpensWithTheUserAgentKey() throws {
        let ua = try ES256Key(rawPrivateKey: b64(RFC8291.uaPrivate))
        #expect(ua.publicKeyRaw == b64(RFC8291.uaPublic))
        let plain = try WebPushCrypto.decrypt(body: b64(RFC8291.body), uaKey: ua, authSecret: b64(RFC8291.authSecret))
        #expect(String(decoding: plain, as: UTF8.self) == RFC8291.plaintext)
        #expect(throws: PushCryptoError.decryptionFailed) {
            try WebPushCrypto.decrypt(body: b64(RFC8291.body), uaKey: ua, authSecret: [UInt8](repeating: 1, count: 16))
        }
    }

    @Test func ephemeralKeyAndRandomSaltRoundTrip() throws {
        let ua = try ES256Key.generate()
        let auth = try Secrets.randomBytes(16)
        let message = Array("{\"title\":\"build finished\"}".utf8)
        let a = try WebPushCrypto.encrypt(uaPublic: ua.publicKeyRaw, authSecret: auth, plaintext: message)
        let b = try WebPushCrypto.encrypt(uaPublic: ua.publicKeyRaw, authSecret: auth, plaintext: message)
        #expect(a.count == 86 + message.count + 1 + 16)
        #expect(Array(a[16..<21]) == [0, 0, 0x10, 0, 65])
        #expect(a[..<16] != b[..<16], "a fresh salt per message")
        #expect(a[21..<86] != b[21..<86], "a fresh application server key per message")
        #expect(try WebPushCrypto.decrypt(body: a, uaKey: ua, authSecret: auth) == message)
        #expect(try WebPushCrypto.decrypt(body: b, uaKey: ua, authSecret: auth) == message)

        var tampered = a
        tampered[90] ^= 1
        #expect(throws: PushCryptoError.decryptionFailed) {
            try WebPushCrypto.decrypt(body: tampered, uaKey: ua, authSecret: auth)
        }
        #expect(throws: PushCryptoError.self) { try WebPushCrypto.decrypt(body: Array(a[..<90]), uaKey: ua, authSecret: auth) }
    }

    @Test func plaintextLimitIsOneRecord() throws {
        let ua = try ES256Key.generate()
        let auth = [UInt8](repeating: 9, count: 16)
        let empty = try WebPushCrypto.encrypt(uaPublic: ua.publicKeyRaw, authSecret: auth, plaintext: [])
        #expect(try WebPushCrypto.decrypt(body: empty, uaKey: ua, authSecret: auth) == [])
        let full = [UInt8](repeating: 0x41, count: WebPushCrypto.maxPlaintext)
        let body = try WebPushCrypto.encrypt(uaPublic: ua.publicKeyRaw, authSecret: auth, plaintext: full)
        #expect(WebPushCrypto.maxPlaintext == 3993 && body.count == 4096)
        #expect(try WebPushCrypto.decrypt(body: body, uaKey: ua, authSecret: auth) == full)
        #expect(throws: PushCryptoError.self) {
            try WebPushCrypto.encrypt(uaPublic: ua.publicKeyRaw, authSecret: auth, plaintext: full + [0])
        }
    }

    @Test func badSubscriptionKeysAndLengthsAreRefused() throws {
        let ua = b64(RFC8291.uaPublic), auth = b64(RFC8291.authSecret), msg: [UInt8] = [1, 2, 3]
        var offCurve = ua
        offCurve[64] ^= 1
        var compressedTag = ua
        compressedTag[0] = 0x02
        let zeros = [4] + [UInt8](repeating: 0, count: 64)
        let badKeys: [[UInt8]] = [[], Array(ua[..<64]), ua + [0], offCurve, compressedTag, zeros,
                                  [4] + [UInt8](repeating: 0xFF, count: 64)]
        for key in badKeys {
            #expect(throws: PushCryptoError.self) { try WebPushCrypto.encrypt(uaPublic: key, authSecret: auth, plaintext: msg) }
        }
        for badAuth in [[], Array(auth[..<15]), auth + [0]] {
            #expect(throws: PushCryptoError.self) { try WebPushCrypto.encrypt(uaPublic: ua, authSecret: badAuth, plaintext: msg) }
        }
        #expect(throws: PushCryptoError.self) {
            try WebPushCrypto.encrypt(uaPublic: ua, authSecret: auth, plaintext: msg, salt: [UInt8](repeating: 0, count: 15))
        }
        // An off-curve key in a received body's keyid is refused too.
        let uaKey = try ES256Key(rawPrivateKey: b64(RFC8291.uaPrivate))
        var body = b64(RFC8291.body)
        body[21 + 64] ^= 1
        #expect(throws: PushCryptoError.self) { try WebPushCrypto.decrypt(body: body, uaKey: uaKey, authSecret: auth) }
    }

    // MARK: ES256 JWT

    @Test func jwtHasJWSShapeAndVerifies() throws {
        let key = try ES256Key.generate()
        let header: [String: JSON] = ["kid": "ABC123DEFG"]
        let claims: [String: JSON] = ["iss": "DEF123GHIJ", "iat": 1_437_179_036]
        let jwt = try JWT.es256(key: key, header: header, claims: claims)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 3)
        #expect(!jwt.contains("=") && !jwt.contains("+") && !jwt.contains("/"))
        let h = JSON.parse(String(decoding: b64(parts[0]), as: UTF8.self))
        #expect(h == ["alg": "ES256", "kid": "ABC123DEFG"])
        #expect(String(decoding: b64(parts[0]), as: UTF8.self) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        #expect(JSON.parse(String(decoding: b64(parts[1]), as: UTF8.self)) == .object(claims))
        #expect(b64(parts[2]).count == 64, "JWS wants r || s, not DER")

        #expect(JWT.verifyES256(jwt, publicKey: key.publicKeyRaw))
        #expect(!JWT.verifyES256(jwt, publicKey: try ES256Key.generate().publicKeyRaw))
        let forged = parts[0] + "." + Base64URL.encode(Array(#"{"iss":"X","iat":1}"#.utf8)) + "." + parts[2]
        #expect(!JWT.verifyES256(forged, publicKey: key.publicKeyRaw))
        #expect(!JWT.verifyES256(parts[0] + "." + parts[1], publicKey: key.publicKeyRaw))
        #expect(!JWT.verifyES256(jwt + "=", publicKey: key.publicKeyRaw))
        #expect(!JWT.verifyES256(jwt, publicKey: Array(key.publicKeyRaw[..<64])))
    }

    @Test func jwtFromJSONTextIsSignedAsGiven() throws {
        let key = try ES256Key.generate()
        let header = #"{"alg":"ES256","typ":"JWT"}"#, claims = #"{"aud":"https://push.example.net","exp":1453523768}"#
        let jwt = try JWT.es256(key: key, headerJSON: header, claimsJSON: claims)
        let parts = jwt.split(separator: ".").map(String.init)
        #expect(parts[0] == Base64URL.encode(Array(header.utf8)) && parts[1] == Base64URL.encode(Array(claims.utf8)))
        #expect(JWT.verifyES256(jwt, publicKey: key.publicKeyRaw))
        // ECDSA signatures are randomized: same input, another signature, both valid.
        let again = try JWT.es256(key: key, headerJSON: header, claimsJSON: claims)
        #expect(again != jwt && JWT.verifyES256(again, publicKey: key.publicKeyRaw))
        #expect(throws: PushCryptoError.self) { try JWT.es256(key: key, header: ["alg": "HS256"], claims: [:]) }
    }

    // MARK: Keys

    @Test func generatedKeyRoundTripsThroughPKCS8() throws {
        let key = try ES256Key.generate()
        #expect(key.publicKeyRaw.count == 65 && key.publicKeyRaw[0] == 0x04)
        let pem = key.privatePEM
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n") && pem.hasSuffix("-----END PRIVATE KEY-----\n"))
        let loaded = try ES256Key(pem: pem)
        #expect(loaded.publicKeyRaw == key.publicKeyRaw)
        #expect(loaded.privatePEM == pem)
        // A token signed by the reloaded key verifies under the original public key.
        #expect(JWT.verifyES256(try JWT.es256(key: loaded, header: [:], claims: ["iss": "T"]), publicKey: key.publicKeyRaw))
        #expect(try ES256Key.generate().publicKeyRaw != key.publicKeyRaw)
    }

    @Test func rawScalarGivesTheKnownPublicPoint() throws {
        var one = [UInt8](repeating: 0, count: 32)
        one[31] = 1
        // 1 * G is the P-256 base point (SEC 2 / FIPS 186-4).
        let g = "BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"
        #expect(try ES256Key(rawPrivateKey: one).publicKeyRaw == b64(g))
        let order = b64("_____wAAAAD__________7zm-q2nF56E87nKwvxjJVE") // n of P-256 (SEC 2)
        for bad in [[UInt8](repeating: 0, count: 32), order, [UInt8](repeating: 0xFF, count: 32), one + [0], Array(one[1...])] {
            #expect(throws: PushCryptoError.self) { try ES256Key(rawPrivateKey: bad) }
        }
    }

    @Test func sec1AndPKCS8PEMsLoad() throws {
        let expected = try ES256Key(rawPrivateKey: scalarSeven(32)).publicKeyRaw
        let sec1 = DER.pem("EC PRIVATE KEY", DER.sec1(curve: DER.p256, scalar: scalarSeven(32)))
        let p8 = DER.pem("PRIVATE KEY", DER.pkcs8EC(curve: DER.p256, scalar: scalarSeven(32)))
        #expect(try ES256Key(pem: sec1).publicKeyRaw == expected)
        #expect(try ES256Key(pem: p8).publicKeyRaw == expected)
        // Leading text and CRLF line ends, as a downloaded .p8 may have.
        let crlf = "Apple AuthKey\r\n" + p8.split(separator: "\n").joined(separator: "\r\n") + "\r\n"
        #expect(try ES256Key(pem: crlf).publicKeyRaw == expected)
    }

    @Test func otherCurvesKeyTypesAndGarbageAreRefused() throws {
        let refused: [String] = [
            DER.pem("EC PRIVATE KEY", DER.sec1(curve: DER.p384, scalar: scalarSeven(48))),
            DER.pem("PRIVATE KEY", DER.pkcs8EC(curve: DER.p384, scalar: scalarSeven(48))),
            DER.pem("PRIVATE KEY", DER.pkcs8Ed25519(seed: [UInt8](repeating: 7, count: 32))),
            DER.pem("RSA PRIVATE KEY", DER.toyRSA),
            // P-256 with the scalar 0 and the group order: not private keys.
            DER.pem("EC PRIVATE KEY", DER.sec1(curve: DER.p256, scalar: [UInt8](repeating: 0, count: 32))),
            DER.pem("EC PRIVATE KEY", DER.sec1(curve: DER.p256, scalar: b64("_____wAAAAD__________7zm-q2nF56E87nKwvxjJVE"))),
            DER.pem("PUBLIC KEY", DER.seq(DER.seq(DER.ecPublicKey, DER.p256), DER.tlv(0x03, [0] + b64(RFC8291.uaPublic)))),
            String(DER.pem("PRIVATE KEY", DER.pkcs8EC(curve: DER.p256, scalar: scalarSeven(32))).dropLast(30)),
            "", "garbage", "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n",
        ]
        for (i, pem) in refused.enumerated() {
            #expect(throws: PushCryptoError.self, "case \(i)") { try ES256Key(pem: pem) }
        }
        do {
            _ = try ES256Key(pem: "garbage")
        } catch let e as PushCryptoError {
            #expect(e.description.hasPrefix("invalid P-256 private key"))
        }
    }

    // MARK: base64url

    @Test func base64URLEncodesWithoutPaddingAndDecodesStrictly() {
        #expect(Base64URL.encode([]) == "")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.encode(Array("any carnal pleas".utf8)) == "YW55IGNhcm5hbCBwbGVhcw")
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        #expect(Base64URL.decode("YW55IGNhcm5hbCBwbGVhcw==") == Array("any carnal pleas".utf8))
        #expect(Base64URL.decode("QUI=") == [0x41, 0x42])
        for bad in ["Q", "QR", "QQ=", "QQ===", "====", "Q+==", "a/b0", "YW55 IGNh", "YW55\n", "QQ==QQ"] {
            #expect(Base64URL.decode(bad) == nil, "\(bad)")
        }
    }
}
