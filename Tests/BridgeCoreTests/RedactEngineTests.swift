import CBridge
import Testing
@testable import BridgeCore
#if canImport(Dispatch)
import Dispatch
#endif

@Suite("Redaction engine: precision, bytes, limits, lock screen, streaming")
struct RedactEngineTests {
    let r = Redactor.builtIn

    @Test("key names are kept; the value becomes [REDACTED] or [REDACTED:<rule-id>]")
    func keyNameKept() {
        let key = Fake.s(Fake.alnum, 24)
        #expect(r.redact("API_KEY=\(key)").text == "API_KEY=[REDACTED]")
        #expect(r.redact("API_KEY=\(key)", labels: true).text == "API_KEY=[REDACTED:generic-secret]")
        #expect(r.redact("{\"api_key\": \"\(key)\"}").text == "{\"api_key\": \"[REDACTED]\"}")
        #expect(r.redact("api_key: \(key)\nname: x").text == "api_key: [REDACTED]\nname: x")
        let f = r.redact("API_KEY=\(key)").findings
        #expect(f == [RedactionFinding(ruleId: "generic-secret", start: 8, end: 32)])
    }

    @Test("placeholders and references stay", arguments: [
        "API_KEY=$API_KEY", "DB_PASSWORD=${DB_PASSWORD}", "api_key: <your-key>", "secret: \"{{ .Values.secret }}\"",
        "token = os.environ[\"GITHUB_TOKEN\"]", "password = os.getenv('DB_PASSWORD')", "const key = process.env.API_KEY",
        "password: \"********\"", "API_KEY=your_api_key_here", "TOKEN=xxxxxxxxxxxxxxxxxxxx", "password=%(db_password)s",
        "Authorization: Bearer $GITHUB_TOKEN", "curl -u \"$USER:$PASS\" https://x", "postgres://app:${PGPASSWORD}@db/app",
        "secret_key: !vault |", "password: ${{ secrets.DB_PASSWORD }}",
    ])
    func placeholdersStay(_ text: String) {
        let out = r.redact(text)
        #expect(out.text == text, "changed: \(out.text.debugDescription) \(out.findings)")
    }

    @Test("hashes, UUIDs, digests, paths, versions and prose stay", arguments: [
        "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 (HEAD -> main)",
        "Merge 9fceb02d0ae598e95dc970b74767f19372d61af8 into 1c2d3e4f",
        "session 550e8400-e29b-41d4-a716-446655440000 started",
        "integrity=\"sha512-9Xz0a8Qm3kP1Lr7yT2bV6cN4dE5fG6hI7jK8lM9nO0pQ1rS2tU3vW4xY5zA6bC7dE8fG9hI0jK1lM2nO3pQ4rA==\"",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "image: ghcr.io/acme/app@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
        "Edit /Users/dev/projects/codingbridge/Sources/BridgeCore/Redactor.swift",
        "Read ~/.ssh/config and ./secrets/README.md", "C:\\Users\\dev\\AppData\\Local\\token-cache",
        "Please enter your password to continue.", "The token expired; run `gh auth login` again.",
        "Rotate the API key in settings, then restart.", "password reset email sent to the user",
        "Bump swift-argument-parser from 1.5.0 to 1.6.1", "max_tokens: 4096, temperature: 0.2",
        "Running tests: 213 passed, 0 failed in 41.2s", "npm test -- --watch=false --coverage",
        "key: value", "tokens: 12345 used", "primary_key = id", "author: Jane Doe <jane@example.com>",
        "",
    ])
    func harmlessTextStays(_ text: String) {
        let out = r.redact(text)
        #expect(out.text == text, "changed: \(out.text.debugDescription) \(out.findings)")
        #expect(out.findings.isEmpty)
    }

    @Test("the seeds' three-regex redactor's misses are caught")
    func seedMisses() {
        // Formats the seed patterns do not match (no key name, or `Bearer` absent).
        let texts = ["ghp_" + Fake.s(Fake.alnum, 36), "AKIA" + Fake.s(Fake.b32, 16), "xoxb-1234567890-1234567890123-" + Fake.s(Fake.alnum, 24),
                     "postgres://app:" + Fake.password() + "@db/app", "curl -u admin:" + Fake.password() + " https://x"]
        for t in texts { #expect(!r.redact(t).findings.isEmpty, "missed \(t)") }
    }

    @Test("empty input: empty output, no findings")
    func emptyInput() {
        let out = r.redact("")
        #expect(out.text == "" && out.findings.isEmpty)
        let bytes = r.redact(bytes: UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(bytes.bytes == nil && bytes.findings.isEmpty)
    }

    @Test("invalid UTF-8 around and inside a line: secret redacted, other bytes kept exactly")
    func invalidUTF8() {
        let secret = Array(("ghp_" + Fake.s(Fake.alnum, 36)).utf8)
        let input: [UInt8] = [0xFF, 0xFE, 0x20] + secret + [0x20, 0xC3, 0x28, 0xE2, 0x82, 0x20, 0x80, 0x0A]
        let out = input.withUnsafeBytes { r.redact(bytes: $0) }
        let expected: [UInt8] = [0xFF, 0xFE, 0x20] + Array("[REDACTED]".utf8) + [0x20, 0xC3, 0x28, 0xE2, 0x82, 0x20, 0x80, 0x0A]
        #expect(out.bytes == expected)
        #expect(out.findings == [RedactionFinding(ruleId: "github-pat", start: 3, end: 3 + secret.count)])
        // A key name with invalid bytes in the value still redacts up to them.
        let kv: [UInt8] = Array("password=hunter2".utf8) + [0xFF] + Array(" next".utf8)
        let o2 = kv.withUnsafeBytes { r.redact(bytes: $0) }
        #expect(o2.bytes.map { !$0.starts(with: Array("password=hunter2".utf8)) } == true)
    }

    @Test("NUL bytes are ordinary bytes: no truncation, secrets after NUL still found")
    func nulBytes() {
        let secret = "sk-ant-api03-" + Fake.s(Fake.b64url, 95)
        let text = "a\u{0}b \(secret)\u{0} tail\u{0}"
        let out = r.redact(text)
        #expect(out.text == "a\u{0}b [REDACTED]\u{0} tail\u{0}")
        #expect(out.findings.map(\.ruleId) == ["anthropic-api-key"])
    }

    @Test("10 MB of log text: every planted secret found, clean text returned unchanged")
    func tenMegabytes() {
        var log = ""
        let line = "2026-11-22T02:43:42.123Z INFO request completed method=GET path=/api/v1/sessions status=200 duration_ms=35\n"
        var planted: [String] = []
        var i = 0
        while log.utf8.count < 10 << 20 {
            if i % 20_000 == 19_999 {
                let s = "ghp_" + Fake.s(Fake.alnum, 36)
                planted.append(s)
                log += "token refreshed: \(s)\n"
            } else {
                log += line
            }
            i += 1
        }
        let out = r.redact(log)
        #expect(out.findings.count == planted.count)
        #expect(out.findings.allSatisfy { $0.ruleId == "github-pat" })
        for s in planted { #expect(!out.text.contains(s)) }
        #expect(out.text.utf8.count == log.utf8.count - planted.count * (40 - 10))
        let clean = String(repeating: line, count: (10 << 20) / line.utf8.count)
        let c = r.redact(clean)
        #expect(c.findings.isEmpty && c.text == clean)
    }

    @Test("a pathological custom pattern hits the match limit and fails safe: the text is redacted, not leaked")
    func pathologicalPatternFailsSafe() throws {
        let red = try Redactor(customRules: [RedactionRuleSpec(id: "evil", pattern: "(a+)+$")])
        let text = "prefix ok " + String(repeating: "a", count: 40) + "!"
        let out = red.redact(text, labels: true)
        #expect(out.findings.contains { $0.failSafe && $0.ruleId == "evil" })
        #expect(!out.text.contains("aaaa"), "leaked: \(out.text)")
        #expect(out.text.contains("[REDACTED:evil]"))
        // The process keeps serving: the same redactor still works afterwards.
        #expect(red.redact("API_KEY=\(Fake.s(Fake.alnum, 24))").text == "API_KEY=[REDACTED]")
    }

    @Test("a custom pattern that is slow at every position without hitting a limit fails safe on its time budget")
    func slowEverywhereFailsSafe() throws {
        let red = try Redactor(customRules: [RedactionRuleSpec(id: "slow", pattern: "(a+)+$")], includeBuiltIns: false)
        // Each run of 16 'a' costs ~2^16 steps per start position: under the
        // per-match limit, but 85 kB of it would take seconds.
        let text = String(repeating: String(repeating: "a", count: 16) + "!", count: 5000)
        let out = red.redact(text)
        #expect(out.findings.last?.failSafe == true)
        #expect(out.findings.last?.end == text.utf8.count)
        #expect(out.text.hasSuffix("[REDACTED]"))
    }

    @Test("custom rules: compile errors carry PCRE2's message and offset; groups and replacements work")
    func customRules() throws {
        #expect(throws: RedactionPatternError.self) { try Redactor(customRules: [RedactionRuleSpec(id: "bad", pattern: "ab(c")]) }
        do {
            _ = try Redactor(customRules: [RedactionRuleSpec(id: "ok", pattern: "x"), RedactionRuleSpec(id: "bad", pattern: "a[b")])
            Issue.record("should have thrown")
        } catch let e as RedactionPatternError {
            #expect(e.ruleIndex == 1 && e.ruleId == "bad")
            #expect(e.message.contains("missing terminating ]"), "\(e.message)")
            #expect(e.offset == 3)
        }
        #expect(Redactor.validate(pattern: "ticket-[0-9]{4}") == nil)
        let v = Redactor.validate(pattern: "(?<name")
        #expect(v != nil && !(v!.message.isEmpty))
        #expect(throws: RedactionPatternError.self) { try Redactor(customRules: [RedactionRuleSpec(id: "bad]id", pattern: "x")]) }
        #expect(throws: RedactionPatternError.self) { try Redactor(customRules: [RedactionRuleSpec(id: "", pattern: "x")]) }
        let named = try Redactor(customRules: [RedactionRuleSpec(id: "Internal hosts", pattern: "db[0-9]+\\.corp")])
        #expect(named.redact("connect db12.corp", labels: true).text == "connect [REDACTED:Internal hosts]")
        #expect(throws: RedactionPatternError.self) {
            try Redactor(customRules: [RedactionRuleSpec(id: "github-pat", pattern: "x")])
        }
        let red = try Redactor(customRules: [
            RedactionRuleSpec(id: "ticket", pattern: "ticket=(TKT-[0-9]{6})"),
            RedactionRuleSpec(id: "hostname", pattern: "\\binternal-[a-z]+\\.corp\\b", replacement: "<host>"),
        ])
        #expect(red.ruleIds.suffix(2) == ["ticket", "hostname"])
        let out = red.redact("see ticket=TKT-123456 on internal-db.corp", labels: true)
        #expect(out.text == "see ticket=[REDACTED:ticket] on <host>")
        let only = try Redactor(customRules: [RedactionRuleSpec(id: "t", pattern: "foo")], includeBuiltIns: false)
        #expect(only.ruleIds == ["t"])
        #expect(only.redact("ghp_" + Fake.s(Fake.alnum, 36)).findings.isEmpty)
    }

    @Test("a group PCRE2 reports outside the whole match is ignored: the finding stays inside what matched")
    func groupOutsideMatch() throws {
        // "(a)*+$" matches empty at the end, yet PCRE2 leaves group 1 on the
        // "a" of an abandoned start (found by the redact fuzzer).
        let red = try Redactor(customRules: [RedactionRuleSpec(id: "g", pattern: "(a)*+$")], includeBuiltIns: false)
        let out = red.redact("(~\u{6}(a)*+$(\u{0}\u{0}/\u{0}\u{0}/")
        #expect(out.findings.isEmpty)
        #expect(out.text == "(~\u{6}(a)*+$(\u{0}\u{0}/\u{0}\u{0}/")
        // A group in a lookbehind lies before the match: the match, not the
        // name, is what gets hidden.
        let behind = try Redactor(customRules: [RedactionRuleSpec(id: "k", pattern: "(?<=(key)=)x+")], includeBuiltIns: false)
        #expect(behind.redact("key=xx", labels: true).text == "key=[REDACTED:k]")
    }

    @Test("lock screen: generic text with details off; with details on at most 200 characters, cut between characters")
    func lockScreen() {
        let secret = "ghp_" + Fake.s(Fake.alnum, 36)
        let off = r.lockScreen("Run: curl -H 'Authorization: token \(secret)'", showDetails: false)
        #expect(off.text == Redactor.genericLockScreenText)
        #expect(!off.findings.isEmpty)
        // The secret straddles character 200: redaction happens before the cut.
        let long = String(repeating: "é", count: 190) + " " + secret + " tail"
        let on = r.lockScreen(long, showDetails: true)
        #expect(on.text.count <= 200 && on.truncated)
        #expect(!on.text.contains("ghp_") && !on.text.contains(String(secret.dropFirst(4).prefix(6))))
        #expect(on.text.hasPrefix(String(repeating: "é", count: 190)))
        // Multi-scalar characters are never split.
        let flags = String(repeating: "🇫🇷", count: 250)
        let f = r.lockScreen(flags, showDetails: true)
        #expect(f.text == String(repeating: "🇫🇷", count: 200) && f.truncated)
        let short = r.lockScreen("Build finished", showDetails: true)
        #expect(short.text == "Build finished" && !short.truncated)
        // A private key cut off in the preview is still fully hidden.
        let cut = r.lockScreen("key: " + pem, showDetails: true)
        #expect(!cut.text.contains("MIIE"))
    }

    @Test("cb_redact_utf8_prefix counts UTF-8 characters and never splits a sequence")
    func utf8Prefix() {
        func prefix(_ bytes: [UInt8], _ n: Int) -> Int {
            bytes.withUnsafeBufferPointer { b in
                b.withMemoryRebound(to: CChar.self) { cb_redact_utf8_prefix($0.baseAddress, $0.count, n) }
            }
        }
        let s = Array("aé€😀z".utf8) // 1 + 2 + 3 + 4 + 1 bytes
        #expect(prefix(s, 0) == 0)
        #expect(prefix(s, 1) == 1)
        #expect(prefix(s, 2) == 3)
        #expect(prefix(s, 3) == 6)
        #expect(prefix(s, 4) == 10)
        #expect(prefix(s, 99) == 11)
        #expect(prefix([0xE2, 0x82], 1) == 1) // truncated sequence: one byte per character
        #expect(prefix([0x80, 0x80, 0x41], 2) == 2)
    }

    @Test("private key blocks: multi-line, \\n-escaped in JSON, and cut off without END")
    func privateKeys() {
        let out = r.redact("before\n\(pem)\nafter")
        #expect(out.text == "before\n[REDACTED]\nafter")
        let json = "{\"type\":\"service_account\",\"private_key\":\"" +
            pem.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\\n") + "\\n\",\"client_email\":\"x@y\"}"
        let j = r.redact(json)
        // The key block (and possibly the rest of the JSON string value) is gone; the JSON around it stays.
        #expect(j.text.hasPrefix("{\"type\":\"service_account\",\"private_key\":\"[REDACTED]"))
        #expect(j.text.hasSuffix("\",\"client_email\":\"x@y\"}"))
        #expect(!j.text.contains("MIIE") && !j.text.contains("PRIVATE KEY"))
        let truncated = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI\(Fake.s(Fake.b64, 40))\n\(Fake.s(Fake.b64, 30))"
        #expect(r.redact(truncated).text == "[REDACTED]")
    }

    @Test("a shared Redactor is safe to use from many threads at once")
    func concurrentUse() {
        let texts = (0..<64).map { i in "line \(i) API_KEY=\(Fake.s(Fake.alnum, 24)) and ghp_\(Fake.s(Fake.alnum, 36))" }
        let expected = texts.map { r.redact($0).text }
        let results = UnsafeMutableBufferPointer<Bool>.allocate(capacity: texts.count)
        defer { results.deallocate() }
        DispatchQueue.concurrentPerform(iterations: texts.count) { i in
            var ok = true
            for _ in 0..<50 { ok = ok && r.redact(texts[i]).text == expected[i] }
            results[i] = ok
        }
        #expect(results.allSatisfy { $0 })
    }
}

@Suite("Redaction stream (the CLI filter path): bounded memory, nothing missed at chunk boundaries")
struct RedactStreamTests {
    /// Feeds `input` in chunks of the given sizes (cycled) and returns the output.
    static func stream(_ input: [UInt8], chunks: [Int], overlap: Int = 256, maxCarry: Int = 4096,
                       labels: Bool = false) -> (out: [UInt8], findings: [RedactionFinding]) {
        let s = RedactionStream(redactor: .builtIn, labels: labels, overlap: overlap, maxCarry: maxCarry)
        var out: [UInt8] = []
        var i = 0, k = 0
        while i < input.count {
            let n = min(chunks[k % chunks.count], input.count - i)
            out += s.feed(input[i..<(i + n)])
            i += n
            k += 1
        }
        out += s.finish()
        return (out, s.drainFindings())
    }

    func document() -> String {
        var t = ""
        for i in 0..<60 {
            t += "line \(i): nothing to see here, just a long enough line of ordinary log text.\n"
            if i % 7 == 3 { t += "export API_KEY=\(Fake.s(Fake.alnum, 28)) # set by ci\n" }
            if i % 11 == 5 { t += "curl -H 'Authorization: Bearer ghp_\(Fake.s(Fake.alnum, 36))' https://api.github.com\n" }
            if i % 13 == 6 { t += pem + "\n" }
        }
        return t
    }

    @Test("any chunking gives exactly the one-shot output and findings", arguments: [[1], [7], [3, 250, 11], [256], [1000], [65536]])
    func chunkingIsInvisible(_ chunks: [Int]) {
        let doc = document()
        let whole = Redactor.builtIn.redact(doc, labels: true)
        let s = Self.stream(Array(doc.utf8), chunks: chunks, labels: true)
        #expect(String(decoding: s.out, as: UTF8.self) == whole.text)
        #expect(s.findings.map(\.ruleId) == whole.findings.map(\.ruleId))
        #expect(s.findings.map(\.start) == whole.findings.map(\.start))
    }

    @Test("a secret split exactly across a chunk boundary is redacted")
    func secretAcrossBoundary() {
        let secret = "sk-proj-" + Fake.s(Fake.b64url, 120)
        let prefix = String(repeating: "x", count: 300) + " OPENAI_API_KEY="
        let input = Array((prefix + secret + " done\n").utf8)
        // Split in the key name, in the value, right after the '='.
        for cut in [prefix.utf8.count - 5, prefix.utf8.count, prefix.utf8.count + 40] {
            let s = Self.stream(input, chunks: [cut, 100_000])
            let out = String(decoding: s.out, as: UTF8.self)
            #expect(!out.contains(secret.dropFirst(8).prefix(20)), "leaked at cut \(cut)")
            #expect(out.hasSuffix("OPENAI_API_KEY=[REDACTED] done\n"))
        }
    }

    @Test("memory stays bounded: an endless private key body is emitted redacted, not buffered forever")
    func boundedCarry() {
        let body = "-----BEGIN PRIVATE KEY-----\n" + String(repeating: Fake.s(Fake.b64, 63) + "\n", count: 400)
        let s = RedactionStream(redactor: .builtIn, overlap: 256, maxCarry: 4096)
        var out: [UInt8] = []
        var maxBuffered = 0
        for chunk in Array(body.utf8).chunked(100) {
            out += s.feed(chunk)
            maxBuffered = max(maxBuffered, s.bufferedBytes)
        }
        out += s.finish()
        #expect(maxBuffered <= 4096 + 256 + 100)
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.hasPrefix("[REDACTED]"))
        // Every emitted window was redacted as part of the block: no base64 line survives.
        #expect(!text.contains(String(body.split(separator: "\n")[1])))
    }

    @Test("a 10 MB stream goes through in bounded memory with every secret found")
    func largeStream() {
        let line = Array("2026-11-22T02:43:42Z INFO ok path=/a/b status=200 bytes=1234 user=42 request done\n".utf8)
        let secretLine = Array("auth header: Bearer \(Fake.s(Fake.b64url, 40))\n".utf8)
        let s = RedactionStream(redactor: .builtIn)
        s.collectFindings = false
        var chunk: [UInt8] = []
        var planted = 0, total = 0, maxBuffered = 0, outBytes = 0
        while total < 10 << 20 {
            chunk.removeAll(keepingCapacity: true)
            for i in 0..<2000 {
                if (total / line.count + i) % 997 == 0 { chunk += secretLine; planted += 1 } else { chunk += line }
            }
            total += chunk.count
            outBytes += s.feed(chunk).count
            maxBuffered = max(maxBuffered, s.bufferedBytes)
        }
        outBytes += s.finish().count
        #expect(s.findingCount == planted)
        #expect(maxBuffered <= (64 << 10) + chunk.count + 4096)
        #expect(outBytes == total - planted * (40 - 10))
    }
}

extension Array {
    func chunked(_ n: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: n).map { self[$0..<Swift.min($0 + n, count)] }
    }
}

@Suite("Off-loop work for large redactions")
struct LoopWorkTests {
    @Test("runOffLoop runs the work on the thread pool and delivers the result on the loop")
    func offLoop() {
        let loop = EventLoop()
        let big = String(repeating: "ok line\n", count: 100_000) + "API_KEY=\(Fake.s(Fake.alnum, 24))\n"
        var got: String?
        loop.runOffLoop({ Redactor.builtIn.redact(big).text }) { got = $0 }
        #expect(got == nil) // not run inline
        loop.run()
        #expect(got?.hasSuffix("API_KEY=[REDACTED]\n") == true)
    }
}
