import ArgumentParser
import BridgeCore
#if canImport(Glibc)
import Glibc
#endif

/// `<state dir>/listen.json`: where the running server listens on the
/// network, `{"listen": [{"url": "ws://127.0.0.1:41234", "certSha256": null}]}`.
/// `serve` writes it; `hook --print-settings --http` and `devices pair` read it.
enum ListenFile {
    struct Entry {
        var address: NetworkAddress
        var certSha256: String?
    }

    enum ReadError: Error { case missing, malformed }

    static func path(stateDir: String) -> String { stateDir + "/listen.json" }

    /// The listeners in order (URLs that are not ws:// or wss:// are skipped).
    static func read(stateDir: String) throws -> [Entry] {
        let fd = open(path(stateDir: stateDir), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReadError.missing }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0, let doc = JSON.parse(String(decoding: buf[0..<n], as: UTF8.self)),
              let list = doc["listen"]?.arrayValue else { throw ReadError.malformed }
        return list.compactMap { e in
            // a path after the port (ws://host:port/rpc) is not the listener's
            // ("ws:", "", "host:port", "rpc")
            guard let parts = e["url"]?.stringValue?.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false),
                  parts.count >= 3 else { return nil }
            return NetworkAddress(parts[0] + "//" + parts[2]).map { Entry(address: $0, certSha256: e["certSha256"]?.stringValue) }
        }
    }

    /// Replaces the file whole (0600): readers never see half of it.
    static func write(_ entries: [JSON], stateDir: String) throws {
        let target = path(stateDir: stateDir), tmp = target + ".tmp"
        let text = JSON.object(["listen": .array(entries)]).serialized() + "\n"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw ValidationError("cannot write \(tmp): \(String(cString: strerror(errno)))") }
        let ok = text.utf8CString.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress, $0.count - 1) == $0.count - 1 }
        close(fd)
        guard ok, rename(tmp, target) == 0 else { throw ValidationError("cannot write \(target): \(String(cString: strerror(errno)))") }
    }
}
