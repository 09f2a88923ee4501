import BridgeCore
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

/// `codingbridge hook --print-settings [--http]`: the `hooks` block of
/// Claude Code's settings.json that wires every event we use to this
/// server, as command hooks or as http hooks.
enum HookSettings {
    static let tokenVariable = "CODINGBRIDGE_HOOK_TOKEN"
    /// In settings order; the tool events take a matcher.
    static let events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
                         "PermissionRequest", "Notification", "Stop", "SubagentStop", "SessionEnd"]
    static let matched: Set<String> = ["PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"]
    /// Claude Code's own limit on a PermissionRequest hook: a few seconds
    /// over the hook's wait (`ClaudeHookExchange.defaultWaitSeconds`), so
    /// the answer always arrives before Claude Code gives up.
    static let permissionTimeout = 60
    /// Other events are answered at once; an http hook's default limit is
    /// 10 minutes, far too long for a daemon that does not answer.
    static let eventTimeout = 10

    /// One hook's fields, in the order the docs show them.
    typealias Fields = [(String, JSON)]

    /// The whole block: one line per event, valid JSON.
    static func text(_ hook: (String) -> Fields) -> String {
        let lines = events.map { e -> String in
            let hooks = "[" + object(hook(e).map { ($0, $1.serialized()) }) + "]"
            let group = (matched.contains(e) ? [("matcher", "\"*\"")] : []) + [("hooks", hooks)]
            return "    \(JSON.string(e).serialized()): [\(object(group))]"
        }
        return "{\n  \"hooks\": {\n" + lines.joined(separator: ",\n") + "\n  }\n}\n"
    }

    /// A JSON object with its keys in the given order (JSON's objects have
    /// none), from serialized values.
    private static func object(_ fields: [(String, String)]) -> String {
        "{" + fields.map { JSON.string($0).serialized() + ":" + $1 }.joined(separator: ",") + "}"
    }

    /// A command hook: `codingbridge hook`, told the state directory when not the default.
    static func command(stateDir: String?) -> (String) -> Fields {
        let base = "codingbridge hook" + (stateDir.map { " --state-dir " + shellQuoted($0) } ?? "")
        return { event in
            guard event == "PermissionRequest" else { return [("type", "command"), ("command", .string(base))] }
            return [("type", "command"), ("command", .string(base + " --timeout \(Int(ClaudeHookExchange.defaultWaitSeconds))")),
                    ("timeout", .int(Int64(permissionTimeout)))]
        }
    }

    /// An http hook to `url`, the token taken from the environment.
    static func http(url: String) -> (String) -> Fields {
        { event in
            [("type", "http"), ("url", .string(url)),
             ("headers", ["Authorization": .string("Bearer $" + tokenVariable)]),
             ("allowedEnvVars", [.string(tokenVariable)]),
             ("timeout", .int(Int64(event == "PermissionRequest" ? permissionTimeout : eventTimeout)))]
        }
    }

    /// The hook URL of the first loopback `ws://` listener in
    /// `<dir>/listen.json` (written by a server that listens on the network).
    static func hookURL(stateDir dir: String) throws -> String {
        let path = ListenFile.path(stateDir: dir)
        let start = "start one: codingbridge serve --listen ws://127.0.0.1:PORT, or give --url"
        let entries: [ListenFile.Entry]
        do { entries = try ListenFile.read(stateDir: dir) } catch ListenFile.ReadError.missing {
            throw HookError("no \(path): the server listens on no network address; \(start)")
        } catch {
            throw HookError("\(path) is not {\"listen\": [...]}; \(start)")
        }
        guard let a = entries.map(\.address).first(where: { !$0.tls && $0.isLoopback }) else {
            throw HookError("\(path) lists no loopback ws:// address (http hooks are served on loopback only); \(start)")
        }
        return a.httpURL(port: a.port) + "/hooks/claude"
    }

    static func shellQuoted(_ s: String) -> String {
        if !s.isEmpty, s.allSatisfy({ $0.isLetter || $0.isNumber || "/._-+:@%".contains($0) }) { return s }
        return "'" + s.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}
