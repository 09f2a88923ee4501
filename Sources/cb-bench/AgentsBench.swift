import ArgumentParser
import BridgeCore
import BridgeRPC
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench agents`: what the real-agent adapters cost.
///  1. adapter throughput, in-process through the real dispatcher: Claude
///     Code hook PreToolUse, stream-json assistant tool_use and claudecodeui
///     tool_use messages/s, each vs the same tool call as a native
///     `agent.event` measured in the same run (ratio = adapter overhead);
///  2. `codingbridge hook` wall time as Claude Code sees it (spawn, stdin,
///     exit): with no server (the fallback must be instant) and, when `serve
///     --listen` exists, a PreToolUse forwarded to a live server; baseline:
///     the same binary started for `hook --help` (process start alone).
struct AgentsBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agents",
        abstract: "Agent adapters: messages/s vs native agent.event; codingbridge hook wall time vs process start.")

    @Option(help: "Messages per adapter for the throughput figure.") var messages = 50_000
    @Option(help: "Hook runs per wall-time row.") var runs = 30
    @Option(help: "Directory holding codingbridge (default: next to cb-bench).") var binDir: String?

    func run() throws {
        print("cb-bench agents")
        print("")
        throughput()
        print("")
        guard let bin = BenchBinary.find("codingbridge", binDir: binDir) else {
            print("hook wall time: skipped, codingbridge not found (swift build -c release, or --bin-dir)")
            return
        }
        try hookWallTime(bin)
    }

    // MARK: 1. adapters vs native events

    func throughput() {
        let cmd = "npm test -- --runInBand"
        let native: (Int) -> JSON = { i in
            ["sessionId": .string("s\(i % 100)"), "type": "tool_use", "toolName": "Bash", "input": ["command": .string(cmd)]]
        }
        let hook: (Int) -> JSON = { i in
            ["session_id": .string("s\(i % 100)"), "cwd": "/home/dev/app", "hook_event_name": "PreToolUse",
             "transcript_path": "/home/dev/.claude/projects/app/s.jsonl", "permission_mode": "default",
             "tool_name": "Bash", "tool_use_id": .string("toolu_\(i)"), "tool_input": ["command": .string(cmd)]]
        }
        let stream: (Int) -> JSON = { i in
            ["type": "assistant", "session_id": .string("s\(i % 100)"), "parent_tool_use_id": .null,
             "message": ["id": "msg_1", "role": "assistant", "type": "message",
                         "content": [["type": "tool_use", "id": .string("toolu_\(i)"), "name": "Bash",
                                      "input": ["command": .string(cmd)]]]]]
        }
        let ui: (Int) -> JSON = { i in
            ["kind": "tool_use", "sessionId": .string("s\(i % 100)"), "provider": "claude", "toolName": "Bash",
             "toolId": .string("toolu_\(i)"), "toolInput": ["command": .string(cmd)]]
        }
        let base = rate("agent.event", native)
        print("adapter throughput (\(messages) tool calls over 100 sessions, in-process dispatcher, best of 3):")
        print("  " + pad("agent.event (native)", 32) + String(format: "%10.0f msg/s   (baseline)", base))
        for (name, method, make) in [("agent.hook (PreToolUse)", "agent.hook", hook),
                                     ("agent.streamJson (assistant)", "agent.streamJson", stream),
                                     ("agent.claudecodeui (tool_use)", "agent.claudecodeui", ui)] {
            let r = rate(method, make)
            print("  " + pad(name, 32) + String(format: "%10.0f msg/s   %.2fx native (%+.2f us per message)",
                                                r, r / base, (1e6 / r) - (1e6 / base)))
        }
    }

    /// Messages/s for `method` through a fresh in-process server: the lines
    /// are serialised up front so only dispatch, mapping and the engine count.
    func rate(_ method: String, _ params: (Int) -> JSON) -> Double {
        var best = 0.0
        for _ in 0..<3 {
            var o = ServerOptions()
            o.manualClock = true
            o.ephemeral = true
            o.logLevel = .error
            let env = ServerEnvironment(loop: EventLoop(), options: o)
            guard let server = try? RPCServer(env: env) else { return 0 }
            let c = server.makeInProcessClient()
            _ = c.request("initialize", ["clientInfo": ["name": "cb-bench"]])
            let lines = (0..<messages).map { i -> [UInt8] in
                let m: JSON = ["jsonrpc": "2.0", "id": .int(Int64(i)), "method": .string(method), "params": params(i)]
                return Array((m.serialized() + "\n").utf8)
            }
            let t0 = DispatchTime.now().uptimeNanoseconds
            for l in lines { _ = c.send(raw: l) }
            let secs = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            best = max(best, Double(messages) / secs)
        }
        return best
    }

    // MARK: 2. the hook process

    func hookWallTime(_ bin: String) throws {
        let dir = "/tmp/cbb-\(getpid())"
        mkdir(dir, 0o700)
        defer { _ = unlink(dir + "/cb.sock"); rmdir(dir) }
        let pre = Array(#"{"session_id":"bench","cwd":"/home/dev/app","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"npm test"}}"#.utf8)
        let perm = Array(#"{"session_id":"bench","cwd":"/home/dev/app","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf dist"}}"#.utf8)
        print("codingbridge hook wall time (\(runs) runs each; spawn -> exit, stdin JSON as Claude Code sends it):")
        let base = try times(bin, ["hook", "--help"], stdin: [], socket: dir + "/absent.sock")
        row("process start (hook --help)", base, base, note: "baseline")
        let none = try times(bin, ["hook"], stdin: perm, socket: dir + "/absent.sock")
        row("PermissionRequest, no server", none, base, note: "fallback: prints nothing")
        let help = try run(bin, ["serve", "--help"], stdin: [])
        guard help.contains("--listen") else {
            print("  PreToolUse to a live server: skipped (this build's serve has no --listen)")
            return
        }
        let sock = dir + "/cb.sock"
        let server = Process()
        server.executableURL = URL(fileURLWithPath: bin)
        server.arguments = ["serve", "--ephemeral", "--manual-clock", "--log-level", "error", "--listen", "unix:\(sock)"]
        server.standardInput = Pipe()
        server.standardOutput = FileHandle.nullDevice
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        for _ in 0..<500 where access(sock, F_OK) != 0 { usleep(10_000) }
        let live = try times(bin, ["hook"], stdin: pre, socket: sock)
        row("PreToolUse to a live server", live, base, note: "connect + initialize + agent.hook")
    }

    func row(_ name: String, _ t: [Double], _ base: [Double], note: String) {
        let m = median(t), b = median(base)
        print("  " + pad(name, 32) + String(format: "median %6.1f ms  p90 %6.1f ms  %5.2fx baseline (%+.1f ms)  ",
                                            m, t[min(t.count - 1, t.count * 9 / 10)], m / b, m - b) + note)
    }

    func median(_ t: [Double]) -> Double { t[t.count / 2] }

    func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }

    /// Sorted wall times in ms.
    func times(_ bin: String, _ args: [String], stdin: [UInt8], socket: String) throws -> [Double] {
        var out: [Double] = []
        for _ in 0..<runs {
            let t0 = DispatchTime.now().uptimeNanoseconds
            _ = try run(bin, args, stdin: stdin, env: ["CODINGBRIDGE_SOCKET": socket])
            out.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
        }
        return out.sorted()
    }

    @discardableResult
    func run(_ bin: String, _ args: [String], stdin: [UInt8], env: [String: String] = [:]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: bin)
        p.arguments = args
        p.environment = ProcessInfo.processInfo.environment.merging(env) { $1 }
        let inPipe = Pipe(), outPipe = Pipe()
        p.standardInput = inPipe
        p.standardOutput = outPipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        inPipe.fileHandleForWriting.write(Data(stdin))
        try inPipe.fileHandleForWriting.close()
        let data = outPipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
