import CBridge
#if canImport(Glibc)
import Glibc
#endif

/// Tokens and pairing codes. The randomness and hashing are OpenSSL's
/// (CBridge token.c); this only shapes them.
public enum Secrets {
    public struct RandomUnavailable: Error {}

    /// `n` cryptographically strong random bytes.
    public static func randomBytes(_ n: Int) throws -> [UInt8] {
        var b = [UInt8](repeating: 0, count: n)
        guard cb_random_bytes(&b, n) == 0 else { throw RandomUnavailable() }
        return b
    }

    /// Lowercase hex SHA-256 of the UTF-8 of `text`.
    public static func sha256Hex(_ text: String) -> String {
        var out = [CChar](repeating: 0, count: 65)
        var t = text
        t.withUTF8 { cb_sha256_hex($0.baseAddress, $0.count, &out) }
        return String(cString: out)
    }

    /// Equality in time independent of where the strings differ.
    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return cb_ct_equal(x, y, x.count) != 0
    }

    /// A bearer token: 32 random bytes, base64url without padding (43 chars).
    public static func token() throws -> String { Base64URL.encode(try randomBytes(32)) }

    /// Crockford base32: no I, L, O, U, so a person cannot mistype one letter for another.
    static let crockford = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// A pairing code: 10 Crockford base32 characters (50 bits), as XXXXX-XXXXX.
    public static func pairingCode() throws -> String {
        let bytes = try randomBytes(10)
        let chars = bytes.map { crockford[Int($0 & 31)] }
        return String(chars[0..<5]) + "-" + String(chars[5..<10])
    }

    /// A typed code in canonical form (upper case, no dashes or spaces, the
    /// look-alikes I/L -> 1 and O -> 0), nil when it cannot be a code.
    public static func normalizePairingCode(_ typed: String) -> String? {
        var out = ""
        for ch in typed.uppercased() where ch != "-" && ch != " " {
            switch ch {
            case "I", "L": out.append("1")
            case "O": out.append("0")
            default:
                guard crockford.contains(ch) else { return nil }
                out.append(ch)
            }
        }
        return out.count == 10 ? out : nil
    }
}

/// A QR code drawn for a terminal (see `cb_qr_text`).
public enum TerminalQR {
    /// `text` as rows of Unicode half blocks; nil when too long for a QR code.
    public static func render(_ text: String) -> String? {
        var p: UnsafeMutablePointer<CChar>?
        guard cb_qr_text(text, &p) == 0, let p else { return nil }
        defer { free(p) }
        return String(cString: p)
    }
}
