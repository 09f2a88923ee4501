/// EDGE-CASES "Privacy Considerations" / "Content Filtering for Lock Screen":
/// the one gate for everything a person may see outside the terminal. Every
/// effect leaves `Engine.apply` through `pass`, and `activity.get` too, in
/// this order:
/// 1. privacy: with details off (the default) no project path and no todo
///    text on a notification or the Live Activity (the rules already chose
///    generic titles and bodies); in-app banners keep their details;
/// 2. redaction of every text field: titles, bodies, names, operation lines,
///    summaries, messages, userInfo values, the rendered strings;
/// 3. the size budget: control characters become spaces, a field keeps at
///    most 200 characters (a rendered block 1,000) and 4 bytes a character,
///    and a notification or a Live Activity's content stays under 4 KB of
///    JSON (APNs' payload limit and ActivityKit's), cut on grapheme boundaries.
public struct LockScreenGate {
    public let showDetails: Bool
    let redact: (String) -> String

    public static let maxPayloadBytes = 4096
    static let maxField = Privacy.maxDetailCharacters
    static let maxBlock = 1000

    public init(showDetails: Bool, redact: @escaping (String) -> String) {
        self.showDetails = showDetails
        self.redact = redact
    }

    public func pass(_ e: Effect) -> Effect {
        switch e {
        case .postNotification(let n): return .postNotification(notification(n))
        case .showBanner(let b): return .showBanner(banner(b))
        case .startActivity(let c): return .startActivity(activity(c))
        case .updateActivity(let c): return .updateActivity(activity(c))
        case .endActivity(let c): return .endActivity(activity(c))
        case let .questionAnswered(qid, sid, answers, by):
            // Shown in the other apps; kept whole (keys name the questions), only redacted.
            let redacted = Dictionary(answers.map { (redact($0.key), $0.value.map(redact)) }, uniquingKeysWith: +)
            return .questionAnswered(questionId: qid, sessionId: sid, answers: redacted, by: by)
        // Ids, counts and decisions: nothing here is text for a person to read.
        case .clearNotifications, .updateBadge, .approvalResolved, .sessionChanged,
             .connectionRetry, .endBackgroundWork:
            return e
        }
    }

    /// Step 1 for values the rules render from: a path only with details on.
    func path(_ p: String?) -> String? { showDetails ? p : nil }

    /// Step 1 for todo progress: counts always, the current item's text only with details on.
    func progress(_ p: TodoProgress?) -> TodoProgress? {
        guard var p, !showDetails else { return p }
        p.current = nil
        return p
    }

    /// Steps 2 and 3 for one field.
    func text(_ s: String, limit: Int = maxField) -> String {
        Privacy.truncate(Self.withoutControls(redact(s), keepNewlines: limit > Self.maxField), to: limit)
    }

    func notification(_ n: NotificationRequest) -> NotificationRequest {
        var n = n
        n.title = text(n.title)
        n.body = text(n.body)
        n.actions = n.actions.map { var a = $0; a.title = text(a.title); return a }
        if !showDetails { n.userInfo["projectPath"] = nil }
        n.userInfo = n.userInfo.mapValues { text($0) }
        return Budget.fit(n)
    }

    func banner(_ b: Banner) -> Banner {
        var b = b
        b.title = text(b.title)
        b.body = text(b.body)
        b.actions = b.actions.map { var a = $0; a.title = text(a.title); return a }
        return b
    }

    func activity(_ c: ActivityContent) -> ActivityContent {
        var c = c
        c.projectName = text(c.projectName)
        c.projectPath = path(c.projectPath).map { text($0) }
        c.statusText = text(c.statusText)
        c.operation = c.operation.map { text($0) }
        c.progress = progress(c.progress).map { var p = $0; p.current = p.current.map { text($0) }; return p }
        c.progressText = c.progressText.map { text($0) }
        c.message = c.message.map { text($0) }
        if var a = c.approval {
            a.toolName = text(a.toolName)
            a.summary = text(a.summary)
            c.approval = a
        }
        c.rendered.compact = text(c.rendered.compact)
        c.rendered.expanded = text(c.rendered.expanded, limit: Self.maxBlock)
        c.rendered.lockScreen = text(c.rendered.lockScreen, limit: Self.maxBlock)
        return Budget.fit(c)
    }

    /// C0 controls and DEL shown as spaces (newlines kept in multi-line blocks):
    /// nothing to see, and each would cost 6 bytes of JSON escaping.
    static func withoutControls(_ s: String, keepNewlines: Bool) -> String {
        guard s.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) else { return s }
        return String(String.UnicodeScalarView(s.unicodeScalars.map {
            ($0.value < 0x20 && !(keepNewlines && $0 == "\n")) || $0.value == 0x7f ? " " : $0
        }))
    }
}
