import CBridge
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a push crypto operation failed. The cases say what was wrong with the
/// input; none of them carries key material.
public enum PushCryptoError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Not a usable P-256 private key (not PEM, encrypted, another curve or key type).
    case invalidKey(String)
    /// An argument of the wrong size or shape (a public key not on P-256, say).
    case invalidInput(String)
    /// A Web Push body that does not open with this key and auth secret.
    case decryptionFailed
    case outOfMemory

    public var description: String {
        switch self {
        case .invalidKey(let why): return "invalid P-256 private key: \(why)"
        case .invalidInput(let why): return "invalid input: \(why)"
        case .decryptionFailed: return "the push message does not decrypt with this key and auth secret"
        case .outOfMemory: return "out of memory"
        }
    }

    /// The error for a CBridge return code; `otherwise` for CB_EINVAL.
    static func from(_ rc: Int32, otherwise: PushCryptoError) -> PushCryptoError {
        rc == CB_ENOMEM ? .outOfMemory : otherwise
    }
}

/// A P-256 private key: an APNs .p8 signing key, a VAPID key, or a Web Push
/// application server key. Owns its `cb_ec_key_t`; immutable, so one key
/// may sign from many threads at once.
public final class ES256Key: @unchecked Sendable {
    private let key: OpaquePointer
    /// The public key as an uncompressed point (65 bytes, 0x04 || x || y):
    /// the VAPID `k=` value once base64url encoded.
    public let publicKeyRaw: [UInt8]

    private init(owning key: OpaquePointer) {
        self.key = key
        var pub = [UInt8](repeating: 0, count: Int(CB_P256_PUBLIC_LEN))
        cb_ec_key_public_raw(key, &pub)
        publicKeyRaw = pub
    }

    deinit { cb_ec_key_free(key) }

    /// Loads a PEM private key: PKCS#8 (an Apple .p8 file) or SEC1
    /// ("EC PRIVATE KEY"). Throws `invalidKey` for anything but an
    /// unencrypted P-256 private key.
    public convenience init(pem: String) throws {
        var text = pem
        var out: OpaquePointer?
        let rc = text.withUTF8 { buf in
            buf.withMemoryRebound(to: CChar.self) { cb_ec_key_load_pem($0.baseAddress, $0.count, &out) }
        }
        guard rc == 0, let out else {
            throw PushCryptoError.from(rc, otherwise: .invalidKey("not an unencrypted P-256 private key in PEM"))
        }
        self.init(owning: out)
    }

    /// The key with private scalar `rawPrivateKey` (32 bytes, big endian),
    /// as published test vectors and JWK `d` values give it.
    public convenience init(rawPrivateKey: [UInt8]) throws {
        guard rawPrivateKey.count == Int(CB_P256_PRIVATE_LEN) else {
            throw PushCryptoError.invalidKey("a raw P-256 private key is 32 bytes, got \(rawPrivateKey.count)")
        }
        var out: OpaquePointer?
        let rc = cb_ec_key_from_raw(rawPrivateKey, &out)
        guard rc == 0, let out else {
            throw PushCryptoError.from(rc, otherwise: .invalidKey("scalar is 0 or not below the P-256 group order"))
        }
        self.init(owning: out)
    }

    /// A fresh random key.
    public static func generate() throws -> ES256Key {
        var out: OpaquePointer?
        let rc = cb_ec_key_generate(&out)
        guard rc == 0, let out else { throw PushCryptoError.from(rc, otherwise: .invalidKey("key generation failed")) }
        return ES256Key(owning: out)
    }

    /// The private key as unencrypted PKCS#8 PEM ("PRIVATE KEY", the .p8 layout).
    public var privatePEM: String {
        var p: UnsafeMutablePointer<CChar>?
        let rc = cb_ec_key_private_pem(key, &p)
        // The key was validated when it was made: only allocation can fail,
        // and Swift traps on that everywhere else too.
        guard rc == 0, let p else { preconditionFailure("cb_ec_key_private_pem: \(String(cString: cb_strerror(rc)))") }
        defer { cb_ec_key_pem_free(p) }
        return String(cString: p)
    }

    /// The C key, for the calls below; valid while `self` is alive.
    fileprivate func withKey<R>(_ body: (OpaquePointer) throws -> R) rethrows -> R {
        try withExtendedLifetime(self) { try body(key) }
    }
}

/// ES256 JSON Web Tokens (JWS compact serialization): APNs provider tokens
/// and VAPID (RFC 8292) tokens.
public enum JWT {
    /// Signs header and claims. `alg` is set to ES256 when the header lacks
    /// it; another `alg` throws. Object keys are written in sorted order, so
    /// equal inputs give equal signing input.
    public static func es256(key: ES256Key, header: [String: JSON], claims: [String: JSON]) throws -> String {
        var header = header
        switch header["alg"] {
        case nil: header["alg"] = "ES256"
        case .string("ES256"): break
        default: throw PushCryptoError.invalidInput("the header's alg must be ES256")
        }
        return try sign(key: key, header: sortedObject(header), claims: sortedObject(claims))
    }

    /// Signs JSON texts exactly as given (the caller vouches that they are JSON).
    public static func es256(key: ES256Key, headerJSON: String, claimsJSON: String) throws -> String {
        try sign(key: key, header: Array(headerJSON.utf8), claims: Array(claimsJSON.utf8))
    }

    /// True when `jwt` is an ES256 token whose signature verifies under the
    /// uncompressed P-256 point `publicKey`. The claims are not interpreted.
    public static func verifyES256(_ jwt: String, publicKey: [UInt8]) -> Bool {
        guard publicKey.count == Int(CB_P256_PUBLIC_LEN) else { return false }
        let t = Array(jwt.utf8)
        return t.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { cb_jwt_es256_verify(publicKey, $0.baseAddress, $0.count) == 0 }
        }
    }

    private static func sign(key: ES256Key, header: [UInt8], claims: [UInt8]) throws -> String {
        var out: UnsafeMutablePointer<CChar>?
        let rc = header.withUnsafeBufferPointer { h in
            claims.withUnsafeBufferPointer { c in
                h.withMemoryRebound(to: CChar.self) { h in
                    c.withMemoryRebound(to: CChar.self) { c in
                        key.withKey { cb_jwt_es256($0, h.baseAddress, h.count, c.baseAddress, c.count, &out) }
                    }
                }
            }
        }
        guard rc == 0, let out else { throw PushCryptoError.from(rc, otherwise: .invalidInput("signing failed")) }
        defer { free(out) }
        return String(cString: out)
    }

    /// Compact JSON of an object with its top-level keys sorted.
    static func sortedObject(_ o: [String: JSON]) -> [UInt8] {
        var out: [UInt8] = [0x7B]
        for (i, k) in o.keys.sorted().enumerated() {
            if i > 0 { out.append(0x2C) }
            JSON.encodeString(k, into: &out)
            out.append(0x3A)
            o[k]!.encode(into: &out)
        }
        out.append(0x7D)
        return out
    }
}

/// Web Push message encryption (RFC 8291, aes128gcm content coding).
public enum WebPushCrypto {
    /// The most plaintext one push message carries (one 4096-byte record).
    public static let maxPlaintext = Int(CB_WEBPUSH_MAX_PLAINTEXT)

    /// The request body for a push message to a subscription with keys
    /// `uaPublic` (p256dh, 65 bytes) and `authSecret` (auth, 16 bytes).
    /// Leave `serverKey` and `salt` nil: they exist to replay test vectors.
    public static func encrypt(uaPublic: [UInt8], authSecret: [UInt8], plaintext: [UInt8],
                               serverKey: ES256Key? = nil, salt: [UInt8]? = nil) throws -> [UInt8] {
        try check(uaPublic: uaPublic, authSecret: authSecret)
        guard plaintext.count <= maxPlaintext else {
            throw PushCryptoError.invalidInput("plaintext of \(plaintext.count) bytes exceeds \(maxPlaintext)")
        }
        if let salt, salt.count != Int(CB_WEBPUSH_SALT_LEN) {
            throw PushCryptoError.invalidInput("salt must be 16 bytes, got \(salt.count)")
        }
        var body: UnsafeMutablePointer<UInt8>?
        var len = 0
        let rc: Int32 = withOptionalKey(serverKey) { as_ in
            withOptionalBytes(salt) { s in
                cb_webpush_encrypt(uaPublic, uaPublic.count, authSecret, authSecret.count,
                                   plaintext, plaintext.count, as_, s, &body, &len)
            }
        }
        guard rc == 0, let body else {
            throw PushCryptoError.from(rc, otherwise: .invalidInput("uaPublic is not a point on P-256"))
        }
        defer { free(body) }
        return Array(UnsafeBufferPointer(start: body, count: len))
    }

    /// The user agent's side: the plaintext of a single-record body, for
    /// tests and diagnostics. Throws `decryptionFailed` when it does not open.
    public static func decrypt(body: [UInt8], uaKey: ES256Key, authSecret: [UInt8]) throws -> [UInt8] {
        guard authSecret.count == Int(CB_WEBPUSH_AUTH_LEN) else {
            throw PushCryptoError.invalidInput("authSecret must be 16 bytes, got \(authSecret.count)")
        }
        var out: UnsafeMutablePointer<UInt8>?
        var len = 0
        let rc = uaKey.withKey { cb_webpush_decrypt($0, authSecret, authSecret.count, body, body.count, &out, &len) }
        guard rc == 0, let out else { throw PushCryptoError.from(rc, otherwise: .decryptionFailed) }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: len))
    }

    private static func check(uaPublic: [UInt8], authSecret: [UInt8]) throws {
        guard uaPublic.count == Int(CB_P256_PUBLIC_LEN), uaPublic.first == 0x04 else {
            throw PushCryptoError.invalidInput("uaPublic must be a 65-byte uncompressed P-256 point, got \(uaPublic.count) bytes")
        }
        guard authSecret.count == Int(CB_WEBPUSH_AUTH_LEN) else {
            throw PushCryptoError.invalidInput("authSecret must be 16 bytes, got \(authSecret.count)")
        }
    }

    private static func withOptionalKey<R>(_ k: ES256Key?, _ body: (OpaquePointer?) -> R) -> R {
        guard let k else { return body(nil) }
        return k.withKey { body($0) }
    }

    private static func withOptionalBytes<R>(_ b: [UInt8]?, _ body: (UnsafePointer<UInt8>?) -> R) -> R {
        guard let b else { return body(nil) }
        return b.withUnsafeBufferPointer { body($0.baseAddress) }
    }
}

/// base64url without padding (RFC 4648 section 5), as JWTs and Web Push
/// subscription keys spell bytes.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        var out: UnsafeMutablePointer<CChar>?
        let rc = cb_base64url_encode(bytes, bytes.count, &out, nil)
        guard rc == 0, let out else { preconditionFailure("cb_base64url_encode: \(String(cString: cb_strerror(rc)))") }
        defer { free(out) }
        return String(cString: out)
    }

    /// The bytes of `text`, with or without `=` padding; nil for any other
    /// character (standard base64's `+` and `/` included) or an impossible length.
    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        var out: UnsafeMutablePointer<UInt8>?
        var len = 0
        let rc = text.withUTF8 { buf in
            buf.withMemoryRebound(to: CChar.self) { cb_base64url_decode($0.baseAddress, $0.count, &out, &len) }
        }
        // Allocation failure traps, as it does for Swift's own arrays.
        precondition(rc != CB_ENOMEM, "cb_base64url_decode: out of memory")
        guard rc == 0, let out else { return nil }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: len))
    }
}
