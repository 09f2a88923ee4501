import ArgumentParser
import BridgeCore
import BridgeRPC
#if canImport(Glibc)
import Glibc
#endif

/// `codingbridge demo`: a realistic agent session played through the real
/// server (the in-process client takes the same dispatch path as stdio, on a
/// manual clock), drawn as the person would see it: lock screen, Dynamic
/// Island compact and expanded, each notification as it arrives, elapsed time
/// ticking. Every string on screen comes from the server's responses.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Watch a coding-agent session as the phone would show it (a few seconds).",
        discussion: """
        Plays: task start, phone locked (Live Activity starts), reading code, a \
        TodoWrite list advancing, an approval request with a secret in the command \
        (redacted on the lock screen), answered from the notification after a pause, \
        tests, completion. Uses `serve`'s dispatcher in-process with a manual clock, \
        so it is deterministic and needs no network.
        """)

    @Option(name: .long, parsing: .unconditional, help: "Playback speed multiplier, in (0, 1000] (2 = twice as fast).")
    var speed: Double = 1

    @Flag(name: .long, help: "No pauses at all (CI).")
    var instant = false

    @Flag(name: .long, help: "Plain ASCII drawing (automatic when stdout is not a UTF-8 terminal).")
    var ascii = false

    @Flag(name: .long, help: "Keep showNotificationDetails off (the default setting): generic lock-screen text.")
    var privateDetails = false

    func validate() throws {
        try OptionRange.check("--speed", speed, 0, 1000, unit: "a multiplier")
    }

    func run() throws {
        let tty = isatty(1) == 1
        let lang = (getenv("LC_ALL").map { String(cString: $0) } ?? getenv("LANG").map { String(cString: $0) } ?? "")
        let unicode = !ascii && tty && lang.uppercased().contains("UTF-8")
        var screen = DemoScreen(unicode: unicode, tty: tty, pause: instant ? 0 : 0.4 / speed)
        var options = ServerOptions()
        options.manualClock = true
        options.ephemeral = true
        options.logLevel = .error
        let env = ServerEnvironment(loop: EventLoop(), options: options)
        let server = try RPCServer(env: env)
        let rpc = DemoRPC(client: server.makeInProcessClient())
        _ = try rpc.call("initialize", ["clientInfo": ["name": "codingbridge demo", "version": "1"], "capabilities": [:]])
        _ = rpc.client.notify("initialized", [:])
        try play(rpc, &screen)
    }

    func play(_ rpc: DemoRPC, _ screen: inout DemoScreen) throws {
        let sid = "demo-1"
        func event(_ type: String, _ extra: [String: JSON] = [:]) throws {
            var p: [String: JSON] = ["sessionId": .string(sid), "type": .string(type), "projectName": "MyApp",
                                     "projectPath": "~/code/MyApp"]
            for (k, v) in extra { p[k] = v }
            _ = try rpc.call("agent.event", .object(p))
        }
        func todos(_ done: Int) -> JSON {
            let items = [("Reproduce the failing login test", "Reproducing the failing test"),
                         ("Fix token expiry check", "Fixing token expiry check"),
                         ("Add a regression test", "Adding a regression test"),
                         ("Run the full test suite", "Running the full test suite")]
            return .array(items.enumerated().map { i, it in
                ["content": .string(it.0), "activeForm": .string(it.1),
                 "status": .string(i < done ? "completed" : i == done ? "in_progress" : "pending")]
            })
        }
        /// Moves the clock in steps, redrawing the activity so the elapsed time ticks.
        func wait(_ seconds: Int, steps: Int = 3) throws {
            for _ in 0..<steps {
                _ = try rpc.call("debug.advanceClock", ["ms": .int(Int64(seconds * 1000 / steps))])
                screen.tick(try rpc.call("activity.get")["activity"], notes: rpc.take())
            }
        }

        screen.title("CodingBridge demo: \"Is Claude working, done, or waiting for me?\"")
        if !privateDetails {
            _ = try rpc.call("settings.update", ["showNotificationDetails": true])
            screen.say("Settings: 'Show Details on Lock Screen' is on for this demo (default off: try --private-details).")
        }
        screen.say("Alex sends Claude a task from the app: \"Fix the failing login test\".")
        try event("task_started", ["prompt": "Fix the failing login test"])
        screen.show(rpc.take(), activity: nil, caption: "App in foreground: no notification, no Live Activity (OVERVIEW table).")

        screen.say("Alex locks the phone.")
        _ = try rpc.call("app.update", ["phase": "background"])
        screen.show(rpc.take(), activity: try rpc.call("activity.get")["activity"], caption: "Live Activity starts.")
        try wait(12)

        try event("tool_use", ["toolName": "Read", "input": ["file_path": "Sources/Auth/Token.swift"]])
        try event("progress", ["todos": todos(0)])
        screen.show(rpc.take(), activity: try rpc.call("activity.get")["activity"], caption: "Claude reads code and writes a todo list.")
        try wait(30)

        try event("tool_use", ["toolName": "Bash", "input": ["command": "swift test --filter LoginTests"]])
        try event("progress", ["todos": todos(1)])
        screen.show(rpc.take(), activity: try rpc.call("activity.get")["activity"], caption: "Progress updates silently.")
        try wait(45)

        let cmd = "NPM_TOKEN=npm_Zq8xV4mB2nK7pR1sT9wY3cD6fH0jL5gA npm install jsonwebtoken@9"
        // Claude Code suggests a rule with the request: the app offers "Always allow".
        let suggestion: JSON = ["type": "addRules", "rules": [["toolName": "Bash", "ruleContent": "npm install:*"]],
                                "behavior": "allow", "destination": "localSettings"]
        try event("approval_request", ["requestId": "req-42", "toolName": "Bash", "input": ["command": .string(cmd)],
                                       "permissionSuggestions": [suggestion]])
        screen.show(rpc.take(), activity: try rpc.call("activity.get")["activity"],
                    caption: "Claude needs permission: an actionable notification arrives (secret redacted).")
        let offered = try rpc.call("approval.list")["approvals"]?.arrayValue?.first?["permissionSuggestions"]?.arrayValue ?? []
        let rules = offered.flatMap { $0["rules"]?.arrayValue ?? [] }.compactMap { r -> String? in
            guard let tool = r["toolName"]?.stringValue else { return nil }
            return r["ruleContent"]?.stringValue.map { "\(tool)(\($0))" } ?? tool
        }
        if !rules.isEmpty {
            screen.say("In the app the request also offers [Always allow] \(rules.joined(separator: ", ")): "
                       + "approval.respond alwaysAllow, and Claude stops asking.")
        }
        screen.say("Alex is in a meeting; the approval waits (timeout 60 s)...")
        try wait(18, steps: 3)
        screen.say("Alex taps Approve on the lock screen.")
        let r = try rpc.call("approval.respond", ["requestId": "req-42", "decision": "allow", "deviceId": "alex-iphone",
                                                  "source": "notification"])
        screen.show(rpc.take(), activity: try rpc.call("activity.get")["activity"],
                    caption: "approval.respond -> \(r["status"]?.stringValue ?? "?"): notification cleared, badge 0.")
        let again = try rpc.call("approval.respond", ["requestId": "req-42", "decision": "deny", "deviceId": "alex-ipad"])
        screen.say("A second tap on the iPad answers '\(again["status"]?.stringValue ?? "?")' and changes nothing.")
        try wait(20)

        try event("tool_use", ["toolName": "Edit", "input": ["file_path": "Sources/Auth/Token.swift"]])
        try event("progress", ["todos": todos(2)])
        screen.show(rpc.take(), activity: try rpc.call("activity.get")["activity"], caption: "Editing files.")
        try wait(40)
        try event("progress", ["todos": todos(3)])
        try event("tool_use", ["toolName": "Bash", "input": ["command": "swift test"]])
        screen.show(rpc.take(), activity: try rpc.call("activity.get")["activity"], caption: "Running the whole suite.")
        try wait(60)

        try event("progress", ["todos": todos(4)])
        try event("task_completed", ["summary": "All 212 tests passing; token expiry fixed"])
        screen.show(rpc.take(), activity: nil, caption: "Task complete: a notification with sound; the Live Activity ends.")
        let m = try rpc.call("metrics.get")
        let c = m["counters"]
        screen.say("Metrics: \(c?["notificationSent"]?.intValue ?? 0) notifications, "
                   + "\(c?["approvalFromNotification"]?.intValue ?? 0) approval from a notification, "
                   + "\(m["missedApprovals"]?.intValue ?? 0) missed approvals.")
        screen.say("Run it yourself: codingbridge serve (JSON-RPC on stdio); see `codingbridge serve --help`.")
    }
}

/// Requests through the in-process client; notifications are kept for the screen.
final class DemoRPC {
    let client: InProcessClient
    private var notes: [(String, JSON)] = []
    init(client: InProcessClient) { self.client = client }

    func call(_ method: String, _ params: JSON? = nil) throws -> JSON {
        var result: JSON?
        for m in client.request(method, params) {
            if let name = m["method"]?.stringValue, m["id"] == nil { notes.append((name, m["params"] ?? .null)); continue }
            if let e = m["error"] { throw ValidationError("\(method) failed: \(e.serialized())") }
            result = m["result"]
        }
        guard let result else { throw ValidationError("\(method): no reply") }
        return result
    }

    func take() -> [(String, JSON)] { defer { notes = [] }; return notes }
}

/// Terminal drawing: boxes for the lock screen and the Dynamic Island, cards
/// for notifications. ASCII when the terminal is not UTF-8 (or not a terminal).
struct DemoScreen {
    let unicode: Bool
    let tty: Bool
    let pause: Double
    let width = 58

    func out(_ s: String) {
        let text = unicode ? s : DemoScreen.asciify(s)
        print(text)
        fflush(stdout)
    }

    static func asciify(_ s: String) -> String {
        var r = ""
        for ch in s {
            switch ch {
            case "·", "•": r += "-"
            case "—", "–": r += "--"
            case "…": r += "..."
            case "“", "”": r += "\""
            case "’": r += "'"
            default:
                if ch.isASCII { r.append(ch) } else { r += "?" }
            }
        }
        return r
    }

    func sleep(_ s: Double) {
        guard s > 0 else { return }
        usleep(useconds_t(min(s, 60) * 1_000_000))  // usleep takes 32 bits; no pause is longer than a minute
    }

    func title(_ t: String) {
        out(t)
        out(String(repeating: unicode ? "═" : "=", count: min(width + 4, t.count)))
    }

    func say(_ t: String) {
        out("")
        out("> " + t)
        sleep(pause * 0.6)
    }

    func box(_ title: String, _ lines: [String]) {
        let h = unicode ? "─" : "-"
        let v = unicode ? "│" : "|"
        let (tl, tr, bl, br) = unicode ? ("╭", "╮", "╰", "╯") : ("+", "+", "+", "+")
        let head = "\(h) \(title) "
        out("  " + tl + head + String(repeating: h, count: max(0, width - head.count)) + tr)
        for l in lines {
            let line = unicode ? l : DemoScreen.asciify(l)
            let cut = line.count > width - 2 ? String(line.prefix(width - 3)) + (unicode ? "…" : ".") : line
            out("  " + v + " " + cut + String(repeating: " ", count: max(0, width - 1 - cut.count)) + v)
        }
        out("  " + bl + String(repeating: h, count: width) + br)
    }

    func drawActivity(_ a: JSON?) {
        guard let a, a != .null, let r = a["rendered"] else { return }
        let lock = r["lockScreen"]?.stringValue ?? ""
        box("Lock Screen", lock.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
        out("  Dynamic Island (compact):   ( \(r["compact"]?.stringValue ?? "") )")
        let exp = (r["expanded"]?.stringValue ?? "").split(separator: "\n").map(String.init)
        out("  Dynamic Island (expanded):  " + (exp.first ?? ""))
        for l in exp.dropFirst() { out("                               " + l) }
    }

    func drawNote(_ method: String, _ p: JSON) {
        switch method {
        case "notification.post":
            let level = p["interruptionLevel"]?.stringValue ?? ""
            let sound = p["sound"]?.boolValue == true ? ", sound" : ""
            let actions = (p["actions"]?.arrayValue ?? []).compactMap { $0["title"]?.stringValue }.map { "[\($0)]" }
            var lines = [p["body"]?.stringValue ?? ""]
            if !actions.isEmpty { lines.append(actions.joined(separator: " ")) }
            lines.append("badge \(p["badge"]?.intValue ?? 0) · \(p["deepLink"]?.stringValue ?? "")")
            box("Notification: \(p["title"]?.stringValue ?? "") (\(level)\(sound))", lines)
        case "notification.clear":
            out("  notification cleared: " + (p["ids"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", "))
        case "banner.show":
            box("In-app banner: \(p["title"]?.stringValue ?? "")", [p["body"]?.stringValue ?? ""])
        case "badge.update":
            out("  app icon badge: \(p["count"]?.intValue ?? 0)")
        case "activity.start":
            out("  Live Activity started")
        case "activity.end":
            out("  Live Activity ended (\(p["statusText"]?.stringValue ?? ""))")
            drawActivity(p)
        case "approval.resolved":
            let how = p["alwaysAllow"]?.boolValue == true ? " (always allow)" : p["interrupt"]?.boolValue == true ? " (and stop)" : ""
            out("  approval \(p["requestId"]?.stringValue ?? "") resolved: \(p["decision"]?.stringValue ?? "")\(how) by \(p["by"]?.stringValue ?? "timeout")")
        default:
            break   // session.changed, activity.update: the activity box shows them
        }
    }

    /// One step of the story: what arrived, then the current activity.
    mutating func show(_ notes: [(String, JSON)], activity: JSON?, caption: String) {
        out("")
        out("  -- " + caption)
        for (m, p) in notes { drawNote(m, p) }
        drawActivity(activity)
        sleep(pause)
    }

    /// Time passes: redraw only the ticking compact line (the full box on a TTY
    /// would scroll; one line per tick reads well in a log too).
    mutating func tick(_ activity: JSON?, notes: [(String, JSON)]) {
        for (m, p) in notes { drawNote(m, p) }
        if let c = activity?["rendered"]?["compact"]?.stringValue {
            out("     ... ( \(c) )")
        }
        sleep(pause / 3)
    }
}
