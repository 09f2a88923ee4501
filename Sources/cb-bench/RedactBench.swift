import ArgumentParser
import BridgeCore
import CBridge
import CPCRE2
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cb-bench redact`: our redactor against, in the same run, (a) the seeds'
/// approach (NSRegularExpression, their three patterns compiled per call, one
/// rewrite per pattern) and (b) PCRE2 applying each of our catalog rules in
/// turn (compiled once, JIT, one global substitution per rule). Calls/s on
/// ~200-byte notification texts (mostly clean, some with secrets) and MB/s on
/// log-like text, full catalog. Also counts what each approach leaks and
/// mangles on the notification corpus.
struct RedactBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redact",
        abstract: "Redaction: calls/s on 200-byte notifications and MB/s on log text; ours (C and Swift) vs NSRegularExpression (seeds) and PCRE2 rule-by-rule."
    )

    @Option(help: "Seconds per measurement (each is repeated `repeats` times, best kept).") var seconds = 0.4
    @Option(help: "Runs of each measurement; the best is reported (the machine is shared).") var repeats = 3
    @Option(help: "Size of the log-like text in MiB.") var logMiB = 4

    func run() throws {
        let notes = Corpus.notifications()
        let log = Corpus.log(bytes: logMiB << 20)
        let avg = notes.map { $0.text.utf8.count }.reduce(0, +) / notes.count
        let withSecrets = notes.filter { !$0.secrets.isEmpty }.count
        print("cb-bench redact: \(Redactor.catalog.count) built-in rules, JIT \(Redactor.builtIn.usesJIT ? "on" : "off"); "
              + "\(notes.count) notification texts (avg \(avg) B, \(withSecrets) with secrets); log text \(log.utf8.count >> 20) MiB; best of \(repeats)")
        print("")

        let seeds = SeedRedactor()
        let perRule = try PerRuleRedactor()
        let ours = Redactor.builtIn

        // The machine is shared: besides wall-clock rates, report rates per
        // second of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which
        // other processes do not inflate. Ratios use the CPU-time rates.
        struct Rate { var wall = 0.0, cpu = 0.0 }
        func cpuNow() -> Double {
            var ts = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
            return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        }
        func measure(units: Double, _ pass: () -> Int) -> Rate {
            var best = Rate()
            for _ in 0..<max(1, repeats) {
                var passes = 0, sink = 0
                let t0 = DispatchTime.now().uptimeNanoseconds, c0 = cpuNow()
                var elapsed = 0.0
                repeat {
                    sink &+= pass()
                    passes += 1
                    elapsed = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
                } while elapsed < seconds
                let cpu = cpuNow() - c0
                if sink == -1 { print(sink) }
                best.wall = max(best.wall, units * Double(passes) / elapsed)
                best.cpu = max(best.cpu, units * Double(passes) / max(cpu, 1e-9))
            }
            return best
        }
        func callsPerSecond(_ body: (String) -> Int) -> Rate {
            measure(units: Double(notes.count)) { var k = 0; for n in notes { k &+= body(n.text) }; return k }
        }
        func mbPerSecond(_ body: (String) -> Int) -> Rate {
            measure(units: Double(log.utf8.count) / 1e6) { body(log) }
        }

        // Ours, C level: cb_redact_run with a reused result (no Swift strings).
        let cRun: (String) -> Int = { text in
            var res = cb_redact_result_t()
            var t = text
            let n = t.withUTF8 { b in
                b.withMemoryRebound(to: CChar.self) { c -> Int in
                    _ = cb_redact_run(ours.rules, c.baseAddress, c.count, 0, &res)
                    return res.len + res.nfindings
                }
            }
            cb_redact_result_free(&res)
            return n
        }
        var reused = cb_redact_result_t()
        defer { cb_redact_result_free(&reused) }
        let cRunReused: (String) -> Int = { text in
            var t = text
            return t.withUTF8 { b in
                b.withMemoryRebound(to: CChar.self) { c -> Int in
                    _ = cb_redact_run(ours.rules, c.baseAddress, c.count, 0, &reused)
                    return reused.len + reused.nfindings
                }
            }
        }
        let swiftRun: (String) -> Int = { ours.redact($0).text.utf8.count }

        struct Row { var name: String; var calls: Rate; var mbs: Rate }
        var rows: [Row] = []
        rows.append(Row(name: "(a) seeds: NSRegularExpression, 3 patterns/call", calls: callsPerSecond(seeds.redact), mbs: mbPerSecond(seeds.redactLog)))
        rows.append(Row(name: "(b) PCRE2 JIT, each of our \(perRule.count) rules in turn", calls: callsPerSecond(perRule.redact), mbs: mbPerSecond(perRule.redact)))
        rows.append(Row(name: "ours, C (cb_redact_run, result reused)", calls: callsPerSecond(cRunReused), mbs: mbPerSecond(cRunReused)))
        rows.append(Row(name: "ours, C (fresh result per call)", calls: callsPerSecond(cRun), mbs: mbPerSecond(cRun)))
        rows.append(Row(name: "ours, Swift Redactor.redact(String)", calls: callsPerSecond(swiftRun), mbs: mbPerSecond(swiftRun)))

        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        print(pad("", 48) + "  notifications: calls/s              |  log text: MB/s")
        print(pad("", 48) + "      wall  per CPU-s  vs(a)  vs(b)  |   wall  per CPU-s  vs(a)  vs(b)")
        for r in rows {
            print(pad(r.name, 48) + String(format: "%10.0f %10.0f %6.1fx %5.1fx  | %6.1f %10.1f %6.1fx %5.1fx",
                                           r.calls.wall, r.calls.cpu, r.calls.cpu / rows[0].calls.cpu, r.calls.cpu / rows[1].calls.cpu,
                                           r.mbs.wall, r.mbs.cpu, r.mbs.cpu / rows[0].mbs.cpu, r.mbs.cpu / rows[1].mbs.cpu))
        }
        print("targets (full catalog): >= 1,000,000 calls/s on 200-byte notifications, >= 300 MB/s on log text")
        print("")

        // The CLI path: RedactionStream over the log text in 256 KiB chunks
        // (re-scans 64 KiB per chunk), against one-shot cb_redact_run.
        let logBytes = Array(log.utf8)
        let stream = measure(units: Double(logBytes.count) / 1e6) {
            let st = RedactionStream(redactor: ours)
            st.collectFindings = false
            var out = 0, i = 0
            while i < logBytes.count {
                let j = min(i + (256 << 10), logBytes.count)
                out += st.feed(logBytes[i..<j]).count
                i = j
            }
            return out + st.finish().count
        }
        print(pad("ours, streaming filter (CLI path, 256 KiB chunks)", 48)
              + String(format: "  %6.1f MB/s wall, %6.1f MB/s per CPU-s (%.2fx one-shot C)", stream.wall, stream.cpu,
                       stream.cpu / rows[2].mbs.cpu))
        print("")

        // Precision on the notification corpus: planted secrets that survive,
        // harmless tokens (hashes, UUIDs, paths, digests) that get mangled.
        print(pad("", 50) + "   secrets leaked   harmless mangled")
        for (name, f) in [("(a) seeds", seeds.redact(_:) as (String) -> String), ("(b) PCRE2 rule-by-rule", perRule.redactText),
                          ("ours", { ours.redact($0).text })] {
            var leaked = 0, mangled = 0, secrets = 0, harmless = 0
            for n in notes {
                let out = f(n.text)
                secrets += n.secrets.count
                harmless += n.harmless.count
                leaked += n.secrets.filter { out.contains($0) }.count
                mangled += n.harmless.filter { !out.contains($0) }.count
            }
            print(pad(name, 50) + String(format: "%9d / %-6d %9d / %-6d", leaked, secrets, mangled, harmless))
        }
    }
}


/// The seeds' sanitizeForLockScreen (EDGE-CASES "Privacy Considerations"),
/// without the details toggle: three NSRegularExpression patterns compiled on
/// every call, one rewrite per pattern, then prefix(200).
struct SeedRedactor {
    static let patterns = [
        "(?i)(api[_-]?key|token|secret|password|credential)\\s*[:=]\\s*[\"']?[\\w-]+",
        "(?i)bearer\\s+[\\w-]+",
        "[A-Za-z0-9+/]{40,}={0,2}",
    ]
    func rewrite(_ content: String) -> String {
        var sanitized = content
        for pattern in Self.patterns {
            if let regex = try? NSRegularExpression(pattern: pattern) {
                sanitized = regex.stringByReplacingMatches(in: sanitized, range: NSRange(sanitized.startIndex..., in: sanitized),
                                                           withTemplate: "[REDACTED]")
            }
        }
        return sanitized
    }
    func redact(_ content: String) -> String { String(rewrite(content).prefix(200)) }
    func redact(_ content: String) -> Int { redact(content).utf8.count }
    /// For the log workload the 200-character cut is left out (it would skip the work).
    func redactLog(_ content: String) -> Int { rewrite(content).utf8.count }
}

/// PCRE2 applying each catalog rule in turn: every pattern compiled once
/// (unanchored, JIT), one global substitution per rule producing a new string.
final class PerRuleRedactor {
    private var codes: [OpaquePointer] = []
    private let md: OpaquePointer
    var count: Int { codes.count }

    init() throws {
        for i in 0..<cb_redact_builtin_count() {
            var err: Int32 = 0
            var off = 0
            let pat = cb_redact_builtin_pattern(i)!
            guard let c = pcre2_compile_8(UnsafeRawPointer(pat).assumingMemoryBound(to: UInt8.self), strlen(pat), 0, &err, &off, nil) else {
                throw ValidationError("rule \(i) does not compile unanchored")
            }
            pcre2_jit_compile_8(c, UInt32(PCRE2_JIT_COMPLETE))
            codes.append(c)
        }
        md = pcre2_match_data_create_8(8, nil)
    }
    deinit {
        codes.forEach { pcre2_code_free_8($0) }
        pcre2_match_data_free_8(md)
    }

    func redactBytes(_ input: [UInt8]) -> [UInt8] {
        var cur = input
        var out = [UInt8](repeating: 0, count: input.count + 256)
        let rep = Array("[REDACTED]".utf8)
        for c in codes {
            while true {
                var outLen = out.count
                let rc = cur.withUnsafeBufferPointer { s in
                    rep.withUnsafeBufferPointer { r in
                        out.withUnsafeMutableBufferPointer { o in
                            pcre2_substitute_8(c, s.baseAddress, s.count, 0, UInt32(PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH),
                                               md, nil, r.baseAddress, r.count, o.baseAddress, &outLen)
                        }
                    }
                }
                if rc == PCRE2_ERROR_NOMEMORY { out = [UInt8](repeating: 0, count: outLen + 1); continue }
                if rc > 0 { cur = Array(out[0..<outLen]) }
                break
            }
        }
        return cur
    }
    func redactText(_ s: String) -> String { String(decoding: redactBytes(Array(s.utf8)), as: UTF8.self) }
    func redact(_ s: String) -> Int { redactBytes(Array(s.utf8)).count }
}

/// Bench inputs, generated from a fixed seed.
enum Corpus {
    struct Note { var text: String; var secrets: [String]; var harmless: [String] }
    static var rng: UInt64 = 0xC0FF_EE00_0000_0001
    static func next() -> UInt64 {
        rng &+= 0x9E37_79B9_7F4A_7C15
        var z = rng
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    static func s(_ alphabet: String, _ n: Int) -> String {
        let a = Array(alphabet)
        var out = String((0..<n).map { _ in a[Int(next() % UInt64(a.count))] })
        if alphabet.contains("7") && !out.contains(where: \.isNumber) { out.removeLast(); out += "7" }
        return out
    }
    static let alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    static let hex = "0123456789abcdef"

    static func notifications() -> [Note] {
        let gh = "ghp_" + s(alnum, 36), akia = "AKIA" + s("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
        let pw = "Zq81-vNw02" + s(alnum, 4), slack = "xoxb-1234567890-1234567890123-" + s(alnum, 24)
        let proj = "sk-proj-" + s(alnum + "-_", 60)
        let sha = s(hex, 40), uuid = "\(s(hex, 8))-\(s(hex, 4))-4\(s(hex, 3))-a\(s(hex, 3))-\(s(hex, 12))"
        let sri = "sha512-" + s(alnum + "+/", 86) + "=="
        let path = "/Users/dev/projects/codingbridge/Sources/BridgeCore/NotificationSettingsView.swift"
        var notes = [
            Note(text: "Claude wants to run: npm test -- --watch=false in /Users/dev/projects/codingbridge (notification settings tests), then build the app and report the failures it finds", secrets: [], harmless: []),
            Note(text: "Edit file \(path): replace the toggle label with a localized string and update the preview provider", secrets: [], harmless: [path]),
            Note(text: "Task completed: 7 of 7 todos done, 213 tests passed in 41.2s; commit \(sha) pushed to origin/main, the pull request is ready for review", secrets: [], harmless: [sha]),
            Note(text: "Question: should I also update the README section about background notifications and the Live Activity on the lock screen, or leave the docs for a separate change later?", secrets: [], harmless: []),
            Note(text: "Read 14 files matching **/*.swift under Sources/BridgeEngine, searching for approvalTimeout and the reminder scheduling code paths used by the notification policy", secrets: [], harmless: []),
            Note(text: "Session \(uuid) is waiting for approval: Bash(swift build -c release --product codingbridge 2>&1 | tail -n 20) in the project directory", secrets: [], harmless: [uuid]),
            Note(text: "Approve edit to package-lock.json: \"integrity\": \"\(sri)\" for swift-argument-parser 1.5.0", secrets: [], harmless: [sri]),
            Note(text: "Grep for TODO and FIXME in the whole repository, excluding vendored dependencies and generated files, then summarise the findings by directory and by owner", secrets: [], harmless: []),
            Note(text: "Run: curl -H 'Authorization: token \(gh)' https://api.github.com/repos/acme/app/pulls?state=open", secrets: [gh], harmless: []),
            Note(text: "Write .env: DATABASE_URL=postgres://app:\(pw)@db.internal:5432/app and AWS_ACCESS_KEY_ID=\(akia)", secrets: [pw, akia], harmless: []),
            Note(text: "Bash: SLACK_BOT_TOKEN=\(slack) OPENAI_API_KEY=\(proj) ./scripts/notify.sh", secrets: [slack, proj], harmless: []),
            Note(text: "Running tests: swift test --filter RedactTests --parallel; 61 of 64 done, elapsed 2:45, next: the BridgeRPCTests suite, then the end-to-end tests over stdio", secrets: [], harmless: []),
        ]
        // Notification bodies of about 200 bytes.
        notes = notes.map { n in
            var n = n
            let tails = [" (session codingbridge-main)", " on branch feature/notifications", " in the main worktree"]
            var k = 0
            while n.text.utf8.count < 190 { n.text += tails[k % tails.count]; k += 1 }
            return n
        }
        // Mostly clean: the clean texts appear several times for every one with secrets.
        notes += notes.filter { $0.secrets.isEmpty }
        return notes
    }

    static func log(bytes: Int) -> String {
        let lines = [
            "2026-11-22T02:43:42.123Z INFO  server: request completed method=GET path=/api/v1/sessions status=200 duration_ms=35 bytes=1234\n",
            "2026-11-22T02:43:42.456Z DEBUG engine: session 550e8400-e29b-41d4-a716-446655440000 status processing -> awaitingApproval\n",
            "2026-11-22T02:43:42.789Z WARN  transport: client disconnected (reason: broken pipe), retrying in 1500ms attempt=3\n",
            "2026-11-22T02:43:43.012Z INFO  tool_use Bash command=\"swift test --filter RedactTests\" cwd=/home/dev/codingbridge\n",
            "2026-11-22T02:43:43.345Z INFO  auth: token refreshed for user 42, expires_in=3600 scope=\"repo read:org\"\n",
            "2026-11-22T02:43:43.678Z INFO  git: commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 pushed to origin/main (12 files)\n",
            "2026-11-22T02:43:43.901Z DEBUG notify: posted approval request id=req_8812 category=APPROVAL thread=session-1\n",
            "2026-11-22T02:43:44.234Z INFO  build: compiling 214 Swift files for target BridgeEngine (release, -O)\n",
        ]
        let secretLines = [
            "2026-11-22T02:43:44.567Z ERROR db: connection failed url=postgres://app:Zq81vNw02LpX@db.internal:5432/app err=timeout\n",
            "2026-11-22T02:43:44.890Z DEBUG http: GET /user headers={\"Authorization\": \"Bearer ghp_\(s(alnum, 36))\"}\n",
        ]
        var out = ""
        out.reserveCapacity(bytes + 256)
        var i = 0
        while out.utf8.count < bytes {
            out += i % 50 == 49 ? secretLines[(i / 50) % 2] : lines[i % lines.count]
            i += 1
        }
        return out
    }
}
