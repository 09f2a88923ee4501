import CBridge
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One secret found by the redactor: which rule, and where. Offsets are UTF-8
/// byte offsets into the input, `start..<end` being the bytes that were
/// replaced (the value; a key name such as `API_KEY=` is kept).
public struct RedactionFinding: Equatable, Hashable, Sendable, CustomStringConvertible {
    public var ruleId: String
    public var start: Int
    public var end: Int
    /// True when the finding is a fail-safe: a rule hit its match limit, so
    /// everything from `start` on was redacted.
    public var failSafe: Bool

    public init(ruleId: String, start: Int, end: Int, failSafe: Bool = false) {
        self.ruleId = ruleId
        self.start = start
        self.end = end
        self.failSafe = failSafe
    }

    public var description: String { "\(ruleId)[\(start)..<\(end)]\(failSafe ? " (fail-safe)" : "")" }
}

/// A user-defined rule (settings): PCRE2 syntax, matched on bytes, unanchored.
/// With a capture group, group 1 is the secret and the rest of the match is
/// kept; otherwise the whole match is replaced.
public struct RedactionRuleSpec: Equatable, Sendable {
    public var id: String
    public var pattern: String
    /// nil: "[REDACTED]" (or "[REDACTED:<id>]" when labels are asked for).
    public var replacement: String?

    public init(id: String, pattern: String, replacement: String? = nil) {
        self.id = id
        self.pattern = pattern
        self.replacement = replacement
    }
}

/// Why a custom rule was refused: PCRE2's message and the byte offset in the
/// pattern where it stopped (the settings layer answers -32602 with these).
public struct RedactionPatternError: Error, Equatable, Sendable, CustomStringConvertible {
    public var ruleIndex: Int
    public var ruleId: String
    public var message: String
    public var offset: Int

    public var description: String { "rule '\(ruleId)': \(message) at offset \(offset)" }
}

/// The redaction engine: an immutable, compiled rule set (built-in catalog
/// plus custom rules). Safe to share between threads: every call keeps its
/// state on its own stack.
public final class Redactor: @unchecked Sendable {
    package let rules: OpaquePointer

    /// The built-in catalog, compiled once per process.
    public static let builtIn: Redactor = {
        do { return try Redactor() } catch {
            // The catalog is ours and covered by tests; failing here is a bug.
            fatalError("built-in redaction catalog does not compile: \(error)")
        }
    }()

    /// The "details off" lock-screen text (EDGE-CASES notification.approval.body.generic).
    public static let genericLockScreenText = "Claude needs permission to continue"
    public static let lockScreenMaxCharacters = 200

    /// Compiles the built-in catalog (unless `includeBuiltIns` is false) plus
    /// `customRules`. Throws the first pattern that does not compile.
    /// `jit: false` runs PCRE2's interpreter, as on systems without JIT (tests).
    public init(customRules: [RedactionRuleSpec] = [], includeBuiltIns: Bool = true, jit: Bool = true) throws {
        var ptr: OpaquePointer?
        var err = cb_redact_compile_error()
        // Keep C strings alive for the duration of the call.
        let ids = customRules.map { strdup($0.id) }
        let pats = customRules.map { strdup($0.pattern) }
        let reps = customRules.map { $0.replacement.map { strdup($0) } ?? nil }
        defer { (ids + pats + reps).forEach { free($0) } }
        var specs = (0..<customRules.count).map { i in
            cb_redact_custom_rule(id: ids[i], pattern: pats[i], pattern_len: customRules[i].pattern.utf8.count,
                                  replacement: reps[i])
        }
        let rc = specs.withUnsafeMutableBufferPointer { buf in
            cb_redact_rules_create(buf.baseAddress, buf.count,
                                   (includeBuiltIns ? 0 : UInt32(CB_REDACT_NO_BUILTINS)) | (jit ? 0 : UInt32(CB_REDACT_NO_JIT)),
                                   &ptr, &err)
        }
        guard rc == 0, let ptr else {
            let idx = Int(err.rule_index)
            throw RedactionPatternError(ruleIndex: idx, ruleId: idx < customRules.count ? customRules[idx].id : "",
                                        message: Self.message(err), offset: Int(err.offset))
        }
        rules = ptr
        _ = specs
    }

    deinit { cb_redact_rules_free(rules) }

    private static func message(_ err: cb_redact_compile_error) -> String {
        withUnsafeBytes(of: err.message) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Checks a pattern exactly as a custom rule would be compiled; nil when valid.
    public static func validate(pattern: String) -> RedactionPatternError? {
        var err = cb_redact_compile_error()
        let rc = pattern.withCString { cb_redact_validate_pattern($0, pattern.utf8.count, &err) }
        if rc == 0 { return nil }
        return RedactionPatternError(ruleIndex: 0, ruleId: "", message: message(err), offset: Int(err.offset))
    }

    /// The ids of every rule in this set, built-ins first.
    public var ruleIds: [String] {
        (0..<cb_redact_rules_count(rules)).map { String(cString: cb_redact_rule_id(rules, $0)) }
    }

    /// The built-in catalog: id, family (the redact-rules/ file) and a
    /// one-line description per rule, in catalog order.
    public static var catalog: [(id: String, family: String, description: String)] {
        (0..<cb_redact_builtin_count()).map {
            (String(cString: cb_redact_builtin_id($0)), String(cString: cb_redact_builtin_family($0)),
             String(cString: cb_redact_builtin_description($0)))
        }
    }

    /// Rules per family, in catalog order.
    public static var families: [(family: String, count: Int)] {
        var out: [(family: String, count: Int)] = []
        for rule in catalog {
            if out.last?.family == rule.family { out[out.count - 1].count += 1 } else { out.append((rule.family, 1)) }
        }
        return out
    }

    /// Whether PCRE2's JIT compiled every rule (else the interpreter runs them).
    public var usesJIT: Bool { cb_redact_rules_jit(rules) != 0 }

    /// Redacts `text`: secrets become "[REDACTED]" ("[REDACTED:<rule-id>]" with
    /// `labels`). Text without secrets is returned as is, without a copy.
    public func redact(_ text: String, labels: Bool = false) -> (text: String, findings: [RedactionFinding]) {
        // Native strings expose their UTF-8 storage directly: no copy in.
        if let r = text.utf8.withContiguousStorageIfAvailable({ redactUTF8($0, labels: labels) }) {
            return (r.0 ?? text, r.1)
        }
        var copy = text
        let r = copy.withUTF8 { redactUTF8($0, labels: labels) }
        return (r.0 ?? text, r.1)
    }

    private func redactUTF8(_ buf: UnsafeBufferPointer<UInt8>, labels: Bool) -> (String?, [RedactionFinding]) {
        var res = cb_redact_result_t()
        let opts = labels ? UInt32(CB_REDACT_LABELS) : 0
        let base = UnsafeRawPointer(buf.baseAddress)?.assumingMemoryBound(to: CChar.self)
        let rc = cb_redact_run(rules, base, buf.count, opts, &res)
        // Clean text (the common case): nothing was allocated, nothing to free or build.
        if rc == 0 && res.nfindings == 0 && res.findings == nil && res.buf == nil && res.md == nil && res.skip == nil {
            return (nil, [])
        }
        defer { cb_redact_result_free(&res) }
        guard rc == 0 else {
            // Out of memory: show nothing rather than the unredacted input.
            return ("[REDACTED]", [RedactionFinding(ruleId: "internal-error", start: 0, end: buf.count, failSafe: true)])
        }
        guard let t = res.text else { return (nil, []) }
        let out = String(decoding: UnsafeRawBufferPointer(start: t, count: res.len), as: UTF8.self)
        return (out, findingsOf(res, base: 0))
    }

    /// The redacted text only (what the engine's `EngineServices.redact` wants).
    public func redacted(_ text: String) -> String { redact(text).text }

    /// Redacts raw bytes (any content: invalid UTF-8 and NUL are fine).
    /// `bytes` is nil when nothing was found (the input is the output).
    public func redact(bytes: UnsafeRawBufferPointer, labels: Bool = false) -> (bytes: [UInt8]?, findings: [RedactionFinding]) {
        var res = cb_redact_result_t()
        defer { cb_redact_result_free(&res) }
        let opts = labels ? UInt32(CB_REDACT_LABELS) : 0
        let base = bytes.baseAddress?.assumingMemoryBound(to: CChar.self)
        let rc = cb_redact_run(rules, base, bytes.count, opts, &res)
        if rc != 0 {
            // Out of memory: show nothing rather than the unredacted input.
            return (Array("[REDACTED]".utf8), [RedactionFinding(ruleId: "internal-error", start: 0, end: bytes.count, failSafe: true)])
        }
        let findings = findingsOf(res, base: 0)
        guard let t = res.text else { return (nil, findings) }
        return (Array(UnsafeRawBufferPointer(start: t, count: res.len)), findings)
    }

    func findingsOf(_ res: cb_redact_result_t, base: Int) -> [RedactionFinding] {
        guard res.nfindings > 0 else { return [] }
        return (0..<res.nfindings).map { i in
            let f = res.findings[i]
            return RedactionFinding(ruleId: String(cString: cb_redact_rule_id(rules, Int(f.rule))),
                                    start: base + f.start, end: base + f.end,
                                    failSafe: f.flags & UInt32(CB_REDACT_LIMIT_HIT) != 0)
        }
    }

    /// Text for a lock screen or any shared surface. Details off: the generic
    /// text. Details on: the redacted text cut to `maxCharacters` characters
    /// (cut between grapheme clusters, so never inside a UTF-8 sequence).
    /// Redaction runs on the whole text before the cut, so a cut can never
    /// leave the beginning of a secret behind.
    public func lockScreen(_ text: String, showDetails: Bool, labels: Bool = false,
                           generic: String = Redactor.genericLockScreenText,
                           maxCharacters: Int = Redactor.lockScreenMaxCharacters)
        -> (text: String, findings: [RedactionFinding], truncated: Bool)
    {
        let r = redact(text, labels: labels)
        guard showDetails else { return (generic, r.findings, false) }
        let (cut, truncated) = Self.cut(r.text, maxCharacters)
        return (cut, r.findings, truncated)
    }

    static func cut(_ s: String, _ max: Int) -> (String, Bool) {
        // Fast path: the UTF-8 length bounds the character count.
        if s.utf8.count <= max { return (s, false) }
        guard let end = s.index(s.startIndex, offsetBy: max, limitedBy: s.endIndex), end < s.endIndex else {
            return (s, false)
        }
        return (String(s[..<end]), true)
    }
}

