import CBridge

/// Redacts an unbounded byte stream in bounded memory (the `codingbridge
/// redact` filter). Input is fed in chunks of any size; output comes back as
/// soon as it is final.
///
/// Why no secret is missed at a chunk boundary: each step scans the carried
/// tail plus the new chunk, but emits only up to a cut `overlap` bytes before
/// the end of what it has, moved back to a line/space boundary and then to the
/// start of any match that crosses it (a match includes its key name, so
/// `API_KEY=` and its value are always seen together). Everything after the
/// cut is scanned again with the next chunk. Any secret shorter than
/// `overlap` (64 KiB by default; private keys are a few KiB) is therefore seen
/// whole. Memory: `overlap` + chunk + at most `maxCarry` for a match that
/// keeps growing (an unterminated private key block), after which its
/// redacted form is emitted.
public final class RedactionStream {
    public let redactor: Redactor
    public let labels: Bool
    public let overlap: Int
    public let maxCarry: Int
    /// Bytes received but not yet emitted (always re-scanned).
    private var carry: [UInt8] = []
    /// Absolute offset of `carry[0]` in the input stream.
    private var base = 0
    private var res = cb_redact_result_t()
    public private(set) var findings: [RedactionFinding] = []
    /// Keep findings in `findings` (off for huge inputs where only counts matter).
    public var collectFindings = true
    public private(set) var findingCount = 0
    /// Input bytes held for re-scanning (bounded by overlap + chunk + maxCarry).
    public var bufferedBytes: Int { carry.count }

    public init(redactor: Redactor, labels: Bool = false, overlap: Int = 64 << 10, maxCarry: Int = 1 << 20) {
        precondition(overlap > 0 && maxCarry >= overlap)
        self.redactor = redactor
        self.labels = labels
        self.overlap = overlap
        self.maxCarry = maxCarry
    }

    deinit { cb_redact_result_free(&res) }

    /// Takes the findings reported so far (for printing as they come).
    public func drainFindings() -> [RedactionFinding] {
        defer { findings.removeAll(keepingCapacity: true) }
        return findings
    }

    /// Feeds bytes; returns the output that is now final (maybe empty).
    public func feed<C: Collection>(_ bytes: C) -> [UInt8] where C.Element == UInt8 {
        carry.append(contentsOf: bytes)
        if carry.count <= overlap { return [] }
        return step(final: false)
    }

    /// Ends the stream: returns the rest of the output.
    public func finish() -> [UInt8] { step(final: true) }

    private var opts: UInt32 { labels ? UInt32(CB_REDACT_LABELS) : 0 }

    private func step(final: Bool) -> [UInt8] {
        let n = carry.count
        let rules = redactor.rules
        var next: (cut: Int, context: Range<Int>?) = (n, nil)
        let out: [UInt8] = carry.withUnsafeBufferPointer { buf -> [UInt8] in
            let p = UnsafeRawPointer(buf.baseAddress)?.assumingMemoryBound(to: CChar.self)
            if cb_redact_run(rules, p, n, opts, &res) != 0 {
                // Out of memory: drop this window rather than leak it.
                record([RedactionFinding(ruleId: "internal-error", start: base, end: base + n - context, failSafe: true)])
                return Array("[REDACTED]".utf8)
            }
            if !final { next = cutPoint(buf, n) }
            let cut = next.cut
            let out: [UInt8]
            if let t = res.text {
                let from = context > 0 ? cb_redact_output_offset(rules, &res, opts, context) : 0
                let to = cb_redact_output_offset(rules, &res, opts, cut)
                out = from < to ? Array(UnsafeRawBufferPointer(start: t + from, count: to - from)) : []
            } else {
                out = Array(buf[context..<cut])
            }
            var emitted: [RedactionFinding] = []
            for i in 0..<res.nfindings {
                let f = res.findings[i]
                guard f.start < cut else { break }
                guard f.start >= context else { continue } // a secret continued from the last window: reported then
                emitted.append(RedactionFinding(ruleId: String(cString: cb_redact_rule_id(rules, Int(f.rule))),
                                                start: base + f.start - context, end: base + min(f.end, cut) - context,
                                                failSafe: f.flags & UInt32(CB_REDACT_LIMIT_HIT) != 0))
            }
            record(emitted)
            return out
        }
        base += next.cut - context
        if let ctx = next.context {
            carry = Array(carry[ctx])
            context = carry.count
        } else {
            carry.removeFirst(next.cut)
            context = 0
        }
        return out
    }

    /// Where to stop emitting: `overlap` bytes before the end, moved back to a
    /// line/space boundary and then to the start of every match that crosses
    /// it. If that would hold more than `maxCarry` bytes (a match still growing
    /// at the end of the window, like an unterminated private key body), emit
    /// everything, redacted, and keep the first bytes of that match as context
    /// only: the next window re-scans them (so the rule sees e.g. the BEGIN
    /// line again and keeps matching the body) but they are not emitted twice.
    private func cutPoint(_ buf: UnsafeBufferPointer<UInt8>, _ n: Int) -> (cut: Int, context: Range<Int>?) {
        var cut = max(boundary(buf, from: n - overlap), context)
        // A secret continued from the last window (its start is in the context)
        // cannot be re-scanned from its start later: emit through its end, or,
        // still open, flush and keep its context again.
        for i in 0..<res.nfindings {
            let f = res.findings[i]
            guard f.mstart < context && f.mend > cut else { continue }
            if f.mend == n { return (n, f.mstart..<min(n, f.mstart + contextBytes)) }
            cut = f.mend
        }
        var moved = true
        while moved {
            moved = false
            for i in 0..<res.nfindings {
                let f = res.findings[i]
                if f.mstart < cut && f.mend > cut && f.mstart >= context {
                    cut = f.mstart
                    moved = true
                }
            }
        }
        cut = max(cut, context)
        guard n - cut > maxCarry else { return (cut, nil) }
        // Too much held back: flush. A match reaching the end continues as context.
        var open: Int? = nil
        for i in 0..<res.nfindings where res.findings[i].mend == n { open = min(open ?? n, res.findings[i].mstart) }
        guard let ms = open else { return (n, nil) }
        return (n, ms..<min(n, ms + contextBytes))
    }

    /// How much of a still-open match is kept as context for the next window.
    private let contextBytes = 512

    private var context = 0 // leading bytes of `carry` that were already emitted

    private func record(_ f: [RedactionFinding]) {
        findingCount += f.count
        if collectFindings { findings.append(contentsOf: f) }
    }

    /// The last newline (else space) at or before `from`, within 4 KiB, so a
    /// re-scan starts at the beginning of a line or word, never mid-token.
    private func boundary(_ buf: UnsafeBufferPointer<UInt8>, from: Int) -> Int {
        let low = max(0, from - 4096)
        var i = from
        while i > low { if buf[i - 1] == 0x0A { return i }; i -= 1 }
        i = from
        while i > low { if buf[i - 1] == 0x20 || buf[i - 1] == 0x09 { return i }; i -= 1 }
        return from
    }
}
