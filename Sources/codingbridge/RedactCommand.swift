import ArgumentParser
import BridgeCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `codingbridge redact`: a filter, stdin -> stdout, any input size.
struct RedactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redact",
        abstract: "Redact credentials from stdin to stdout (API keys, tokens, passwords, private keys, ...).",
        discussion: """
        Reads stdin in chunks and writes the redacted text to stdout in bounded memory, \
        whatever the input size. Secrets are replaced by [REDACTED], key names are kept \
        (API_KEY=[REDACTED]). A secret that spans two reads is still found: the last \
        64 KiB of each chunk are scanned again with the next one.

        Examples:
          some-command 2>&1 | codingbridge redact
          codingbridge redact --labels --findings < build.log > build.redacted.log
          codingbridge redact --findings-json --rule 'ticket=TKT-[0-9]{6}' < notes.txt

        Exit status: 0 on success (whether or not anything was redacted), 64 on a \
        usage error such as an invalid --rule pattern (PCRE2's message and offset are \
        printed), 1 on an I/O error.
        """
    )

    @Flag(name: .long, help: "Write [REDACTED:<rule-id>] instead of [REDACTED].")
    var labels = false

    @Flag(name: .long, help: "Report each finding on stderr as '<rule-id> <start>-<end>' (input byte offsets).")
    var findings = false

    @Flag(name: .customLong("findings-json"), help: "Report findings on stderr as JSON lines {\"ruleId\",\"start\",\"end\"}.")
    var findingsJSON = false

    @Option(name: .long, parsing: .singleValue,
            help: ArgumentHelp("Add a custom rule (repeatable): ID=PCRE2-PATTERN. Group 1, if any, is the secret.",
                               valueName: "id=pattern"))
    var rule: [String] = []

    @Flag(name: .customLong("no-builtins"), help: "Use only the --rule patterns, not the built-in catalog.")
    var noBuiltins = false

    @Option(name: .customLong("chunk-size"), help: "Bytes read per chunk (default 262144).")
    var chunkSize: Int = 256 << 10

    @Flag(name: .customLong("list-rules"), help: "Print the number of built-in rules per family, then each rule (id, family, description), then exit.")
    var listRules = false

    func validate() throws {
        guard chunkSize >= 1 && chunkSize <= 64 << 20 else {
            throw ValidationError("--chunk-size must be between 1 and 67108864")
        }
        for r in rule where !r.contains("=") {
            throw ValidationError("--rule must be ID=PATTERN, got '\(r)'")
        }
    }

    func run() throws {
        if listRules {
            let catalog = Redactor.catalog
            print("\(catalog.count) built-in rules")
            for (family, count) in Redactor.families { print("  \(family)\t\(count)") }
            print("")
            for rule in catalog { print("\(rule.id)\t\(rule.family)\t\(rule.description)") }
            return
        }
        let specs = rule.map { r -> RedactionRuleSpec in
            let i = r.firstIndex(of: "=")!
            return RedactionRuleSpec(id: String(r[..<i]), pattern: String(r[r.index(after: i)...]))
        }
        let redactor: Redactor
        if specs.isEmpty && !noBuiltins {
            redactor = .builtIn
        } else {
            do { redactor = try Redactor(customRules: specs, includeBuiltIns: !noBuiltins) } catch let e as RedactionPatternError {
                throw ValidationError("invalid --rule '\(e.ruleId)': \(e.message) at offset \(e.offset)")
            }
        }
        let stream = RedactionStream(redactor: redactor, labels: labels)
        stream.collectFindings = findings || findingsJSON
        var buf = [UInt8](repeating: 0, count: chunkSize)
        while true {
            let n = buf.withUnsafeMutableBytes { read(0, $0.baseAddress, chunkSize) }
            if n < 0 {
                if errno == EINTR { continue }
                throw RedactIOError("codingbridge redact: read error: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            try emit(stream.feed(buf[0..<n]))
            report(stream.drainFindings())
        }
        try emit(stream.finish())
        report(stream.drainFindings())
    }

    private func emit(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let w = bytes.withUnsafeBytes { write(1, $0.baseAddress! + off, bytes.count - off) }
            if w < 0 {
                if errno == EINTR { continue }
                throw RedactIOError("codingbridge redact: write error: \(String(cString: strerror(errno)))")
            }
            off += w
        }
    }

    private func report(_ fs: [RedactionFinding]) {
        guard !fs.isEmpty else { return }
        var s = ""
        for f in fs {
            if findingsJSON {
                s += "{\"ruleId\":\"\(f.ruleId)\",\"start\":\(f.start),\"end\":\(f.end)\(f.failSafe ? ",\"failSafe\":true" : "")}\n"
            } else if findings {
                s += "\(f.ruleId) \(f.start)-\(f.end)\(f.failSafe ? " fail-safe" : "")\n"
            }
        }
        fputs(s, stderr)
    }
}

/// A message on stderr and exit status 1.
struct RedactIOError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
