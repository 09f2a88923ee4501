/// Every user-visible string, keyed as EDGE-CASES "Localization"
/// (`Localizable.strings`). English is complete; other locales may be partial
/// and fall back to English key by key. Placeholders: `%@` (text), `%d` (number),
/// filled in order.
public enum Localization {
    public static let english: [String: String] = [
        // Notifications (EDGE-CASES "Localization")
        "notification.approval.title": "Approval Needed",
        "notification.approval.body.generic": "Claude needs permission to continue",
        "notification.approval.body.detailed": "Execute: %@",
        // PRD "Notifications" table body example: "Run: npm test"
        "notification.approval.body.detailed.run": "Run: %@",
        "notification.approval.body.detailed.edit": "Edit: %@",
        "notification.approval.action.approve": "Approve",
        "notification.approval.action.deny": "Deny",
        "notification.question.title": "Claude has a question",
        "notification.question.body.generic": "Claude is waiting for your answer",
        "notification.question.action.open": "Open App",
        "notification.complete.title": "Task Complete",
        "notification.complete.body.generic": "Claude finished working",
        "notification.error.title": "Task Failed",
        "notification.error.body.generic": "Something went wrong. Open the app for details.",
        "notification.paused.title": "Task Paused",
        "notification.paused.body": "Background time expired. Open app to continue.",
        "notification.long_task.title": "Claude is still working",
        "notification.long_task.body": "Running for %@: %@",
        "notification.low_power.title": "Low Power Mode",
        "notification.low_power.body": "Background processing paused to save battery. Open app to continue.",
        "notification.handoff.title": "Session Handed Off",
        "notification.handoff.body": "Continued on another device",
        "notification.connection_lost.title": "Connection Lost",
        "notification.connection_lost.body": "Can't reach the server. Retrying in the background.",
        "notification.decision_expired.title": "Decision Not Sent",
        "notification.decision_expired.body": "The request expired before the connection came back. Nothing was sent.",
        "notification.input.title": "Claude needs your attention",
        "notification.input.body.generic": "Claude is waiting for you in the terminal",
        // Status lines while the agent waits in its terminal (NeedsYou.swift)
        "status.input.permission": "Waiting for your permission in the terminal",
        "status.input.agent": "Claude needs your input",
        "status.input.idle": "Waiting for your input",
        "status.input.next_prompt": "Waiting for your prompt",
        "banner.decision_queued.title": "Offline",
        "banner.decision_queued.allow": "Approval saved. It will be sent when the connection is back.",
        "banner.decision_queued.deny": "Denial saved. It will be sent when the connection is back.",
        // In-app banners
        "banner.missed.title": "While you were away",
        "banner.missed.body": "%d notifications could not be shown: %@. Turn on notifications to stay informed.",
        // (a count restored from a snapshot that did not keep the kinds)
        "banner.missed.body.count": "%d notifications could not be shown. Turn on notifications to stay informed.",
        "banner.approval_timed_out": "Approval timed out - Claude continued",
        // Live Activity (EDGE-CASES "Localization")
        "activity.processing": "Processing",
        "activity.awaiting_approval": "Approval needed",
        "activity.awaiting_answer": "Question pending",
        "activity.awaiting_input": "Needs you",
        "activity.completed": "Completed",
        "activity.error": "Error occurred",
        "activity.idle": "Idle",
        "activity.elapsed": "Elapsed: %@",
        "activity.progress": "%d of %d tasks",
        "activity.progress.complete": "%d of %d tasks complete",
        "activity.approval_timed_out": "Approval timed out - Claude continued",
        "activity.handoff": "Session continued on another device",
        "activity.paused": "Paused - open app to continue",
        "activity.approval.actions": "Approve | Deny",
        // Compact status indicator (OVERVIEW "working/waiting/done")
        "activity.compact.working": "working",
        "activity.compact.waiting": "waiting",
        "activity.compact.done": "done",
        "activity.compact.error": "error",
        "activity.compact.idle": "idle",
        // Operation text derived from tool use (OperationText.swift)
        "operation.starting": "Starting",
        "operation.running_tests": "Running tests",
        "operation.building": "Building project",
        "operation.installing": "Installing dependencies",
        "operation.linting": "Checking code style",
        "operation.git": "Working with git",
        "operation.running_command": "Running a command",
        "operation.editing": "Editing files",
        "operation.reading": "Reading code",
        "operation.searching_web": "Searching the web",
        "operation.subtask": "Working on a subtask",
        "operation.planning": "Planning tasks",
        "operation.asking": "Asking you a question",
        "operation.working": "Working",
        // Elapsed-time words (ElapsedFormatter.Words(table:): short and spoken styles)
        "elapsed.day.one": "day", "elapsed.day.other": "days", "elapsed.day.abbrev": "d",
        "elapsed.hour.one": "hour", "elapsed.hour.other": "hours", "elapsed.hour.abbrev": "h",
        "elapsed.minute.one": "minute", "elapsed.minute.other": "minutes", "elapsed.minute.abbrev": "m",
        "elapsed.second.one": "second", "elapsed.second.other": "seconds", "elapsed.second.abbrev": "s",
        "elapsed.separator": ", ", "elapsed.separator.short": " ", "elapsed.unknown": "unknown duration",
    ]

    /// German, partial on purpose: shows the fallback and that `locale` matters.
    public static let german: [String: String] = [
        "notification.approval.title": "Freigabe nötig",
        "notification.approval.body.generic": "Claude braucht deine Erlaubnis, um weiterzumachen",
        "notification.approval.action.approve": "Erlauben",
        "notification.approval.action.deny": "Ablehnen",
        "notification.question.title": "Claude hat eine Frage",
        "notification.complete.title": "Aufgabe erledigt",
        "notification.complete.body.generic": "Claude ist fertig",
        "notification.error.title": "Aufgabe fehlgeschlagen",
        "activity.processing": "Arbeitet",
        "activity.awaiting_approval": "Freigabe nötig",
        "activity.awaiting_answer": "Frage offen",
        "activity.awaiting_input": "Wartet auf dich",
        "activity.completed": "Fertig",
        "activity.error": "Fehler",
        "activity.elapsed": "Dauer: %@",
        "activity.progress": "%d von %d Aufgaben",
        "activity.progress.complete": "%d von %d Aufgaben erledigt",
        "operation.running_tests": "Tests laufen",
        "operation.building": "Projekt wird gebaut",
        "operation.editing": "Dateien werden bearbeitet",
        "operation.reading": "Code wird gelesen",
        // Elapsed-time words
        "elapsed.day.one": "Tag", "elapsed.day.other": "Tage", "elapsed.day.abbrev": "T",
        "elapsed.hour.one": "Stunde", "elapsed.hour.other": "Stunden", "elapsed.hour.abbrev": "h",
        "elapsed.minute.one": "Minute", "elapsed.minute.other": "Minuten", "elapsed.minute.abbrev": "min",
        "elapsed.second.one": "Sekunde", "elapsed.second.other": "Sekunden", "elapsed.second.abbrev": "s",
        "elapsed.unknown": "unbekannte Dauer",
    ]

    public static let tables: [String: [String: String]] = ["en": english, "de": german]
    public static var supportedLocales: [String] { tables.keys.sorted() }

    /// "de-DE" and "de_CH" use "de"; unknown locales use English.
    public static func table(for locale: String) -> [String: String] { tables[tableName(for: locale)]! }

    /// The key in `tables` that `locale` reads from.
    public static func tableName(for locale: String) -> String {
        if tables[locale] != nil { return locale }
        let lang = String(locale.prefix { $0 != "-" && $0 != "_" }).lowercased()
        return tables[lang] != nil ? lang : "en"
    }

    public static func isSupported(_ locale: String) -> Bool {
        let lang = String(locale.prefix { $0 != "-" && $0 != "_" }).lowercased()
        return tables[lang] != nil
    }
}

/// The strings of one locale.
public struct Strings: Sendable {
    public let locale: String
    private let table: [String: String]

    public init(locale: String) {
        self.locale = locale
        table = Localization.table(for: locale)
    }

    /// A missing key is a programming error in English; we still show the key
    /// rather than crash a server.
    public subscript(_ key: String) -> String {
        table[key] ?? Localization.english[key] ?? key
    }

    public func format(_ key: String, _ args: String...) -> String {
        Strings.fill(self[key], args)
    }

    /// Replaces `%@` and `%d` in order (no Foundation: no locale surprises, no
    /// crash on a mismatched argument count).
    static func fill(_ template: String, _ args: [String]) -> String {
        var out = ""
        out.reserveCapacity(template.utf8.count + 16)
        var i = template.startIndex
        var next = 0
        while i < template.endIndex {
            let c = template[i]
            let j = template.index(after: i)
            if c == "%", j < template.endIndex, template[j] == "@" || template[j] == "d" {
                out += next < args.count ? args[next] : ""
                next += 1
                i = template.index(after: j)
            } else {
                out.append(c)
                i = j
            }
        }
        return out
    }
}
