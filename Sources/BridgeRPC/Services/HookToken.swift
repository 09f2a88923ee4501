import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// The secret a Claude Code http hook shows (`Authorization: Bearer ...`)
/// to prove it was set up by the person who owns the state directory: the
/// loopback port is open to every local user, the 0600 file is not.
public struct HookToken: Sendable {
    public static let fileName = "hook-token"
    /// Shorter than this, the file is not one we wrote.
    static let minimumLength = 32
    public let value: String

    /// 32 random bytes, base64url without padding (43 characters): a
    /// device token's shape (`Secrets.token`).
    public static func random() throws -> HookToken { HookToken(value: try Secrets.token()) }

    /// `<directory>/hook-token`: read when present, else created 0600 with
    /// a fresh token (written whole and linked into place: a crash leaves no
    /// half token, two servers starting at once agree on the first).
    public static func loadOrCreate(directory: String) throws -> HookToken {
        let path = directory + "/" + fileName
        if access(path, F_OK) != 0 {
            let fresh = try random()
            do { try SecretFile.writeNew(path, Array((fresh.value + "\n").utf8), directory: directory) } catch {
                throw HookTokenError("\(error)")
            }
        }
        return try read(path)
    }

    /// Whether an `Authorization` header carries this token, compared in
    /// constant time (only the length, public: always 43, may end it early).
    public func authorizes(_ header: String?) -> Bool {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return false }
        return Secrets.constantTimeEqual(header.dropFirst(7).trimmingSpaces, value)
    }

    private static func read(_ path: String) throws -> HookToken {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HookTokenError("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        // Another user able to read the token could drive our approvals.
        var st = stat()
        if fstat(fd, &st) == 0, st.st_mode & 0o077 != 0 { _ = fchmod(fd, 0o600) }
        var buf = [UInt8](repeating: 0, count: 256)
        let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        let text = n > 0 ? String(decoding: buf[0..<n], as: UTF8.self).trimmingSpaces : ""
        guard text.count >= minimumLength, text.count < 256, !text.contains(where: { $0.isWhitespace }) else {
            throw HookTokenError("\(path) does not hold a hook token; remove it and start the server again to make a new one")
        }
        return HookToken(value: text)
    }
}

public struct HookTokenError: Error, CustomStringConvertible {
    public let description: String
    init(_ d: String) { description = d }
}

private extension StringProtocol {
    var trimmingSpaces: String {
        String(drop(while: { $0.isWhitespace }).reversed().drop(while: { $0.isWhitespace }).reversed())
    }
}
