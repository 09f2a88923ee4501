import CBridge
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The client side of a unix stream socket: the hook command, tests and
/// benchmarks connect to `serve --listen unix:PATH` with it.
public enum UnixSocket {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The address of `path`, or nil when it is empty or does not fit sun_path.
    public static func address(_ path: String) -> sockaddr_un? {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maxPathBytes else { return nil }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }

    /// The longest path a unix socket can have on this system (the listener's limit too).
    public static var maxPathBytes: Int { Int(cb_listen_path_max()) }

    /// connect(2) of `fd` to `addr`: 0, or -1 with errno set.
    public static func connect(_ fd: Int32, to addr: sockaddr_un) -> Int32 {
        var a = addr
        return withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                #if canImport(Glibc)
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                #else
                Darwin.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                #endif
            }
        }
    }

    /// A blocking socket connected to `path`.
    public static func connect(_ path: String) throws -> Int32 {
        guard let addr = address(path) else {
            throw Failure(description: "socket path '\(path)' is empty or longer than \(maxPathBytes) bytes")
        }
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket(): \(String(cString: strerror(errno)))") }
        if connect(fd, to: addr) != 0 {
            let e = errno
            close(fd)
            throw Failure(description: "connect \(path): \(String(cString: strerror(e)))")
        }
        return fd
    }
}
