/// What the engine needs from outside but must not implement itself: the
/// redactor (BridgeCore `Redactor`, PCRE2) and the elapsed-time formatter
/// (BridgeCore `ElapsedFormatter`). The host wires the real ones; the engine
/// stays pure and testable.
public struct EngineServices {
    /// Secrets in `text` replaced; custom rules from Settings already applied
    /// by the host (it recompiles the redactor when they change).
    public var redact: (String) -> String
    /// Seconds -> "2:45" / "1:02:03", as the Live Activity shows elapsed time.
    public var formatElapsed: (Int) -> String

    public init(redact: @escaping (String) -> String, formatElapsed: @escaping (Int) -> String) {
        self.redact = redact
        self.formatElapsed = formatElapsed
    }
}
