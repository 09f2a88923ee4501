import ArgumentParser
import BridgeCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `codingbridge serve` on a temporary state directory with a unix socket and
/// a loopback WebSocket listener, for the network benchmarks.
final class BenchDaemon {
    let exe: String
    let dir: String
    let proc = Process()
    private(set) var port = 0

    private init(exe: String) {
        self.exe = exe
        var template = Array("/tmp/cb-bench-ws-XXXXXX".utf8CString)
        dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    static func start(_ exe: String) throws -> BenchDaemon {
        let d = BenchDaemon(exe: exe)
        d.proc.executableURL = URL(fileURLWithPath: exe)
        d.proc.arguments = ["serve", "--state-dir", d.dir, "--no-stdio", "--log-level", "error",
                            "--listen", "unix", "--listen", "ws://127.0.0.1:0"]
        d.proc.standardInput = FileHandle.nullDevice
        try d.proc.run()
        for _ in 0..<500 {
            if let p = d.listenPort() { d.port = p; return d }
            guard d.proc.isRunning else { break }
            usleep(20_000)
        }
        d.stop()
        throw ValidationError("codingbridge serve did not write \(d.dir)/listen.json")
    }

    private func listenPort() -> Int? {
        guard let data = FileManager.default.contents(atPath: dir + "/listen.json"),
              let doc = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let first = (doc["listen"] as? [[String: Any]])?.first, let url = first["url"] as? String,
              let port = url.split(separator: ":").last.flatMap({ Int($0) }) else { return nil }
        return port
    }

    /// A device token: a pairing code asked for over the trusted unix
    /// socket, then `device.pair`; nil before pairing exists.
    func pairedToken() throws -> String? {
        let c = try SockClient(dir + "/codingbridge.sock")
        defer { c.close() }
        func call(_ id: Int, _ method: String, _ params: String) throws -> [String: Any]? {
            c.write("{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":\"\(method)\",\"params\":\(params)}\n")
            let reply = try JSONSerialization.jsonObject(with: Data(try c.readLine())) as? [String: Any]
            return reply?["result"] as? [String: Any]
        }
        _ = try call(1, "initialize", "{}")
        guard let code = try call(2, "device.pairingCode", "{\"name\":\"bench\"}")?["code"] as? String else { return nil }
        return try call(3, "device.pair", "{\"code\":\"\(code)\",\"name\":\"bench\"}")?["token"] as? String
    }

    func hookToken() -> String? {
        (try? String(contentsOfFile: dir + "/hook-token", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Median wall time of `codingbridge hook` given the body on stdin, in us
    /// (posix_spawn and waitpid: Foundation's Process adds tens of ms).
    func commandHookP50(body: String, runs: Int) -> Double {
        var t: [Double] = []
        let args: [String] = [exe, "hook", "--state-dir", dir]
        let argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        for _ in 0..<runs {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            posix_spawn_file_actions_addopen(&actions, 0, body, O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            defer { posix_spawn_file_actions_destroy(&actions) }
            var pid: pid_t = 0
            let start = DispatchTime.now().uptimeNanoseconds
            guard posix_spawn(&pid, exe, &actions, nil, argv, environ) == 0 else { return .nan }
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            t.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e3)
        }
        t.sort()
        return t[t.count / 2]
    }

    func stop() {
        if proc.isRunning { proc.terminate(); proc.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: dir)
    }
}
