import BridgeCore

/// What a Claude Code hook sends and gets back, the same for a command hook
/// (`codingbridge hook`, stdin -> stdout) and an http hook
/// (`POST /hooks/claude`, request body -> response body), so the two never
/// drift apart.
public enum ClaudeHookExchange {
    /// How long a hook waits for a person's decision unless told otherwise:
    /// under the 60 s the settings give the hook, so Claude Code never kills
    /// a hook that is about to answer.
    public static let defaultWaitSeconds: Double = 55

    /// Turns the hook input into `agent.hook` params. A PermissionRequest
    /// carries how long its hook waits; the approval expires 2 s earlier, so
    /// nobody decides what no hook is left to hear. Returns whether the
    /// hook waits for a decision.
    public static func prepare(_ input: inout [String: JSON], waitSeconds: Double) -> Bool {
        // An AskUserQuestion's PreToolUse waits for the answer from the phone.
        if input["hook_event_name"]?.stringValue == "PreToolUse", input["tool_name"]?.stringValue == "AskUserQuestion" {
            return true
        }
        guard input["hook_event_name"]?.stringValue == "PermissionRequest" else { return false }
        input["timeoutSeconds"] = .double(max(1, waitSeconds - 2))
        return true
    }

    /// What Claude Code gets for an `agent.hook` result: the decision JSON
    /// and a newline, or "" for no output (Claude Code then goes on as if
    /// the hook had not spoken and asks in its own prompt).
    public static func output(_ result: JSON) -> String {
        guard let out = result["hookOutput"], case .object = out else { return "" }
        return out.serialized() + "\n"
    }
}
