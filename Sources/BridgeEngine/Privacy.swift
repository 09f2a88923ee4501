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

    /// First `max` Characters; a cut ends in "…" (which counts toward `max`).
    public static func truncate(_ s: String, to max: Int) -> String {
        guard max > 0 else { return "" }
        // Fast path: byte count bounds character count.
        if s.utf8.count <= max { return s }
        guard let end = s.index(s.startIndex, offsetBy: max, limitedBy: s.endIndex), end < s.endIndex else { return s }
        let cut = s.index(s.startIndex, offsetBy: max - 1)
        return String(s[..<cut]) + "…"
    }
}
