/// EDGE-CASES "Privacy Considerations" / "Content Filtering for Lock Screen":
/// details off (default) -> the generic string; on -> the detail through the
/// redactor, at most 200 characters, cut between characters (never inside a
/// UTF-8 sequence or a grapheme cluster).
public enum Privacy {
    public static let maxDetailCharacters = 200

    /// Text for a lock-screen surface. `generic` is already localized.
    static func lockScreenText(_ detail: String?, generic: String, settings: Settings,
                               services: EngineServices) -> String {
        guard settings.showNotificationDetails, let detail, !detail.isEmpty else { return generic }
        return truncate(services.redact(detail), to: maxDetailCharacters)
    }

    /// In-app text: the person sees details when they open the app (US-4.2),
    /// but secrets are still redacted.
    static func inAppText(_ detail: String, services: EngineServices) -> String {
        truncate(services.redact(detail), to: maxDetailCharacters)
    }

    /// First `max` Characters and at most `bytes` UTF-8 bytes (default 4 a
    /// character: one grapheme cluster can be any length); a cut ends in "…",
    /// which counts toward both. Cuts fall between grapheme clusters.
    public static func truncate(_ s: String, to max: Int, bytes: Int? = nil) -> String {
        guard max > 0 else { return "" }
        let maxBytes = bytes ?? max * 4
        // Fast path: byte count bounds character count.
        if s.utf8.count <= max && s.utf8.count <= maxBytes { return s }
        var count = 0, used = 0, i = s.startIndex
        var cut = s.startIndex  // the longest prefix that leaves room for "…"
        while i < s.endIndex {
            let next = s.index(after: i)
            count += 1
            used += s.utf8.distance(from: i, to: next)
            if count > max || used > maxBytes { return String(s[..<cut]) + "…" }
            if count < max && used <= maxBytes - 3 { cut = next }
            i = next
        }
        return s
    }
}
