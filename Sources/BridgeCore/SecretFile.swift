#if canImport(Glibc)
import Glibc
#endif

/// Why a secret file could not be written ("cannot create ...: Permission denied").
public struct SecretFileError: Error, CustomStringConvertible {
    public let description: String
}

public enum SecretFile {
    /// `bytes` at `path` (0600) unless a file is there already (then that
    /// one stays): written whole to a temporary file and linked into place,
    /// so a crash never leaves half a secret, and two processes starting at
    /// once keep the first one linked.
    public static func writeNew(_ path: String, _ bytes: [UInt8], directory dir: String) throws {
        let tmp = path + ".tmp-\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SecretFileError(description: "cannot create \(tmp): \(String(cString: strerror(errno)))") }
        defer { unlink(tmp) }
        let ok = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count && fsync(fd) == 0
        close(fd)
        guard ok else { throw SecretFileError(description: "cannot write \(tmp): \(String(cString: strerror(errno)))") }
        guard link(tmp, path) == 0 || errno == EEXIST else {
            throw SecretFileError(description: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let d = open(dir, O_RDONLY | O_CLOEXEC)
        if d >= 0 { fsync(d); close(d) }
    }
}
