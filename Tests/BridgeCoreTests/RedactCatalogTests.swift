import Testing
@testable import BridgeCore

// Per-rule cases for the built-in catalog, written by us. Secret-shaped values
// are generated from a fixed seed (never real credentials, never copied from
// other projects' corpora): `Fake.s(alphabet, length)`.

enum Fake {
    static let upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    static let lower = "abcdefghijklmnopqrstuvwxyz"
    static let digits = "0123456789"
    static let alnum = upper + lower + digits
    static let hex = "0123456789abcdef"
    static let b32 = upper + "234567"
    static let upperAlnum = upper + digits
    static let b64 = alnum + "+/"
    static let b64url = alnum + "-_"

    /// SplitMix64: deterministic, so a failing case fails the same way every run.
    nonisolated(unsafe) static var state: UInt64 = 0x5EED_CB00_0000_0001
    static func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// `n` characters of `alphabet`; when the alphabet has letters and digits,
    /// the result has both (generated secrets do).
    static func s(_ alphabet: String, _ n: Int) -> String {
        let a = Array(alphabet)
        while true {
            let out = String((0..<n).map { _ in a[Int(next() % UInt64(a.count))] })
            let hasDigit = out.contains { $0.isNumber }, hasLetter = out.contains { $0.isLetter }
            let needDigit = a.contains { $0.isNumber }, needLetter = a.contains { $0.isLetter }
            if n < 8 || ((!needDigit || hasDigit) && (!needLetter || hasLetter)) { return out }
        }
    }
    static func uuid() -> String { "\(s(hex, 8))-\(s(hex, 4))-4\(s(hex, 3))-a\(s(hex, 3))-\(s(hex, 12))" }
    static func password() -> String { "Tr0ub4-" + s(alnum, 6) + "!" }
}

/// One rule's cases: each positive text must yield a finding of `id` and must
/// not show `secret` in the output; each negative text must yield no finding
/// of `id`.
struct RuleCase: CustomTestStringConvertible, Sendable {
    var id: String
    var positive: [(text: String, secret: String)]
    var negative: [String]
    var testDescription: String { id }
}

let pem = """
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA\(Fake.s(Fake.b64, 48))
\(Fake.s(Fake.b64, 64))
\(Fake.s(Fake.b64, 20))==
-----END RSA PRIVATE KEY-----
"""

let ruleCases: [RuleCase] = {
    typealias F = Fake
    var c: [RuleCase] = []
    func add(_ id: String, _ pos: [(String, String)], _ neg: [String]) {
        c.append(RuleCase(id: id, positive: pos.map { (text: $0.0, secret: $0.1) }, negative: neg))
    }
    func p(_ prefix: String, _ secret: String, _ suffix: String = "") -> (String, String) { (prefix + secret + suffix, secret) }

    // cloud
    let akia = "AKIA" + F.s(F.b32, 16)
    add("aws-access-key-id", [p("aws_access_key_id = ", akia), p("creds: ", "ASIA" + F.s(F.b32, 16), " (temporary)")],
        ["AKIA" + F.s(F.b32, 15) + " is too short", "X" + akia, akia + "Q"])
    let awsSecret = F.s(F.b64, 40)
    add("aws-secret-access-key", [p("aws_secret_access_key = ", awsSecret), p("{\"SecretAccessKey\": \"", awsSecret, "\"}"),
                                  p("export AWS_SECRET_ACCESS_KEY=\"", awsSecret, "\"")],
        ["aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}", "the aws secret key is in the vault", "aws_secret_access_key = " + F.s(F.b64, 39)])
    add("aws-session-token", [p("AWS_SESSION_TOKEN=", F.s(F.b64, 300))], ["aws_session_token = " + F.s(F.alnum, 40)])
    add("gcp-api-key", [p("key=", "AIza" + F.s(F.b64url, 35), "&q=1")], ["AIza" + F.s(F.alnum, 20)])
    add("google-oauth-client-secret", [p("\"client_secret\":\"", "GOCSPX-" + F.s(F.b64url, 28), "\"")], ["GOCSPX-" + F.s(F.alnum, 10)])
    add("google-oauth-access-token", [p("token ", "ya29." + F.s(F.b64url, 150))], ["ya29.abc"])
    add("google-oauth-refresh-token", [p("refresh: ", "1//0" + F.s(F.b64url, 80))], ["ratio 1//0 is undefined"])
    add("gcp-service-account-key-id", [p("{\"type\": \"service_account\", \"private_key_id\": \"", F.s(F.hex, 40), "\"}")],
        ["\"private_key_id\": \"abc\""])
    add("azure-storage-account-key",
        [p("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=", F.s(F.b64, 86) + "==", ";EndpointSuffix=core.windows.net")],
        ["AccountKey=" + F.s(F.alnum, 20) + "=="])
    add("azure-shared-access-key",
        [p("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=", F.s(F.b64, 43) + "=")],
        ["SharedAccessKeyName=RootManageSharedAccessKey", "SharedAccessKey=${SB_KEY}"])
    add("azure-sas-signature", [p("https://a.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sig=", F.s(F.alnum, 43) + "%3D")],
        ["config sig=" + F.s(F.alnum, 43), "?sig=short"])
    add("azure-ad-client-secret", [p("client secret: ", F.s(F.alnum, 3) + "8Q~" + F.s(F.alnum + "_~.-", 34))],
        ["press Q~ to quit", "x" + F.s(F.alnum, 3) + "8Q~" + F.s(F.alnum, 10)])
    add("heroku-api-key", [p("HEROKU_API_KEY=", F.uuid()), p("", "HRKU-" + F.s(F.b64url, 60))],
        ["heroku app: my-app-123", "request id " + F.uuid()])
    add("digitalocean-token", [p("DIGITALOCEAN_TOKEN=", "dop_v1_" + F.s(F.hex, 64))], ["dop_v1_abc"])
    add("databricks-token", [p("token ", "dapi" + F.s(F.hex, 32))], ["dapi" + F.s(F.hex, 31) + " x", "mydapi" + F.s(F.hex, 32)])
    add("vault-token", [p("VAULT_TOKEN=", "hvs." + F.s(F.b64url, 90))], ["hvs.short"])
    add("supabase-token", [p("", "sbp_" + F.s(F.hex, 40))], ["sbp_xyz"])
    // version control
    add("github-pat", [p("git clone https://x:", "ghp_" + F.s(F.alnum, 36), "@github.com/a/b"), p("GH_TOKEN=", "ghp_" + F.s(F.alnum, 36))],
        ["ghp_" + F.s(F.alnum, 35) + " ", "ghp_" + F.s(F.alnum, 37)])
    add("github-oauth-token", [p("", "gho_" + F.s(F.alnum, 36))], ["gho_" + F.s(F.alnum, 20)])
    add("github-app-token", [p("", "ghu_" + F.s(F.alnum, 36)), p("x ", "ghs_" + F.s(F.alnum, 36))], ["ghs_" + F.s(F.alnum, 12)])
    add("github-refresh-token", [p("", "ghr_" + F.s(F.alnum, 76))], ["ghr_abc"])
    add("github-fine-grained-pat", [p("", "github_pat_" + F.s(F.alnum, 22) + "_" + F.s(F.alnum, 59))], ["github_pat_short"])
    add("gitlab-pat", [p("PRIVATE-TOKEN ", "glpat-" + F.s(F.b64url, 20))], ["glpat-abc"])
    add("gitlab-pipeline-trigger-token", [p("", "glptt-" + F.s(F.hex, 40))], ["glptt-" + F.s(F.hex, 39) + " "])
    add("gitlab-runner-token", [p("", "glrt-" + F.s(F.b64url, 20)), p("", "GR1348941" + F.s(F.b64url, 20))], ["glrt-abc"])
    // chat / SaaS
    add("slack-bot-token", [p("SLACK_BOT_TOKEN=", "xoxb-" + F.s(F.digits, 12) + "-" + F.s(F.digits, 13) + "-" + F.s(F.alnum, 24))],
        ["xoxb-123"])
    add("slack-user-token", [p("", "xoxp-" + F.s(F.digits, 12) + "-" + F.s(F.digits, 12) + "-" + F.s(F.digits, 13) + "-" + F.s(F.hex, 32))],
        ["xoxp-12-34"])
    add("slack-app-token", [p("", "xapp-1-" + F.s(F.upperAlnum, 11) + "-" + F.s(F.digits, 13) + "-" + F.s(F.alnum, 64))], ["xapp-1-abc"])
    add("slack-webhook-url", [p("https://hooks.slack.com/services/", "T" + F.s(F.upperAlnum, 8) + "/B" + F.s(F.upperAlnum, 8) + "/" + F.s(F.alnum, 24))],
        ["see https://hooks.slack.com/ for docs", "hooks.slack.com/services/short"])
    add("stripe-secret-key", [p("Stripe.api_key = '", "sk_live_" + F.s(F.alnum, 24), "'"), p("", "sk_test_" + F.s(F.alnum, 99))],
        ["sk_live_short"])
    add("stripe-restricted-key", [p("", "rk_test_" + F.s(F.alnum, 24))], ["rk_live_x"])
    add("stripe-webhook-secret", [p("STRIPE_WEBHOOK_SECRET=", "whsec_" + F.s(F.alnum, 32))], ["whsec_abc"])
    add("twilio-api-key", [p("api key sid ", "SK" + F.s(F.hex, 32))], ["SK" + F.s(F.hex, 31) + " ", "ASK" + F.s(F.hex, 32), "TASK" + F.s(F.hex, 32)])
    add("twilio-auth-token", [p("TWILIO_AUTH_TOKEN=", F.s(F.hex, 32))], ["twilio auth token: rotate it monthly"])
    add("sendgrid-api-key", [p("", "SG." + F.s(F.b64url, 22) + "." + F.s(F.b64url, 43))], ["SG.abc.def"])
    add("mailgun-api-key", [p("api:", "key-" + F.s(F.hex, 32))], ["key-value store", "monkey-" + F.s(F.hex, 32)])
    add("shopify-token", [p("X-Shopify-Access-Token: ", "shpat_" + F.s(F.hex, 32)), p("", "shpss_" + F.s(F.hex, 32))], ["shpat_xyz"])
    do {
        let s = "AA" + F.s(F.b64url, 33)
        add("telegram-bot-token", [("https://api.telegram.org/bot" + F.s(F.digits, 10) + ":" + s + "/getMe", s)], ["ratio 12:AA" + F.s(F.alnum, 33)])
    }
    add("discord-bot-token", [p("DISCORD_BOT_TOKEN=", "M" + F.s(F.alnum, 25) + "." + F.s(F.b64url, 6) + "." + F.s(F.b64url, 38))],
        ["the discord bot token is configured"])
    add("discord-webhook-url", [p("https://discord.com/api/webhooks/" + F.s(F.digits, 18) + "/", F.s(F.b64url, 68))],
        ["https://discord.com/api/webhooks/ docs"])
    add("atlassian-api-token", [p("", "ATATT3" + F.s(F.b64url, 180))], ["ATATT3short"])
    add("linear-api-key", [p("", "lin_api_" + F.s(F.alnum, 40))], ["lin_api_abc"])
    add("postman-api-key", [p("", "PMAK-" + F.s(F.hex, 24) + "-" + F.s(F.hex, 34))], ["PMAK-abc"])
    add("docker-hub-pat", [p("docker login -p ", "dckr_pat_" + F.s(F.b64url, 27))], ["dckr_pat_abc"])
    add("grafana-token", [p("", "glsa_" + F.s(F.alnum, 32) + "_" + F.s(F.hex, 8)), p("", "glc_" + F.s(F.alnum, 60))], ["glsa_abc"])
    add("new-relic-user-key", [p("", "NRAK-" + F.s(F.upperAlnum, 27))], ["NRAK-ABC"])
    add("sentry-token", [p("SENTRY_AUTH_TOKEN=", "sntrys_" + F.s(F.b64, 80))], ["sntrys_abc"])
    add("square-token", [p("", "sq0atp-" + F.s(F.b64url, 22))], ["sq0atp-abc"])
    add("age-secret-key", [p("", "AGE-SECRET-KEY-1" + F.s(F.upperAlnum, 58))], ["AGE-SECRET-KEY-1ABC"])
    // AI providers
    add("openai-api-key", [p("OPENAI_API_KEY=", "sk-" + F.s(F.alnum, 20) + "T3BlbkFJ" + F.s(F.alnum, 20)), p("", "sk-" + F.s(F.alnum, 48))],
        ["sk-" + F.s(F.alnum, 47) + " ", "disk-" + F.s(F.alnum, 48)])
    add("openai-project-key", [p("", "sk-proj-" + F.s(F.b64url, 120))], ["sk-proj-abc"])
    add("openai-service-account-key", [p("", "sk-svcacct-" + F.s(F.b64url, 80)), p("", "sk-admin-" + F.s(F.b64url, 80))], ["sk-admin-x"])
    add("anthropic-api-key", [p("ANTHROPIC_API_KEY=", "sk-ant-api03-" + F.s(F.b64url, 95))], ["sk-ant-api03-short"])
    add("anthropic-admin-key", [p("", "sk-ant-admin01-" + F.s(F.b64url, 95))], ["sk-ant-admin01-x"])
    add("anthropic-oauth-token", [p("CLAUDE_CODE_OAUTH_TOKEN=", "sk-ant-oat01-" + F.s(F.b64url, 95))], ["sk-ant-oat01-x"])
    add("huggingface-token", [p("HF_TOKEN=", "hf_" + F.s(F.alnum, 34))], ["hf_" + F.s(F.alnum, 20), "thf_" + F.s(F.alnum, 34)])
    add("groq-api-key", [p("", "gsk_" + F.s(F.alnum, 52))], ["gsk_abc"])
    add("xai-api-key", [p("", "xai-" + F.s(F.alnum, 80))], ["xai-abc"])
    add("perplexity-api-key", [p("", "pplx-" + F.s(F.alnum, 48))], ["pplx-abc"])
    add("replicate-api-token", [p("", "r8_" + F.s(F.alnum, 37))], ["r8_abc"])
    // registries
    add("npm-access-token", [p("", "npm_" + F.s(F.alnum, 36))], ["npm_" + F.s(F.alnum, 10), "npm_" + F.s(F.alnum, 37)])
    add("npmrc-auth", [p("//registry.npmjs.org/:_authToken=", F.uuid()), p("_auth=", F.s(F.b64, 32))],
        ["//registry.npmjs.org/:_authToken=${NPM_TOKEN}"])
    add("pypi-token", [p("password = ", "pypi-AgEIcHlwaS5vcmc" + F.s(F.b64url, 70))], ["pypi-AgEshort"])
    // structural
    add("jwt", [p("id_token=", "eyJhbGciOiJIUzI1NiJ9.eyJ" + F.s(F.b64url, 40) + "." + F.s(F.b64url, 43))],
        ["eyJhbGciOiJIUzI1NiJ9 is a header", "beyJ" + F.s(F.b64url, 20) + "." + F.s(F.b64url, 20) + "."])
    add("private-key", [p("key:\n", pem, "\nend"),
                        p("{\"private_key\": \"", pem.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\\n"), "\\n\"}"),
                        p("", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + F.s(F.b64, 70) + "\n" + F.s(F.b64, 30))],
        ["-----BEGIN CERTIFICATE-----\n" + F.s(F.b64, 64) + "\n-----END CERTIFICATE-----",
         "-----BEGIN PUBLIC KEY-----\n" + F.s(F.b64, 64) + "\n-----END PUBLIC KEY-----"])
    do {
        let pw = F.password()
        add("url-credentials", [("DATABASE_URL=postgres://app:" + pw + "@db.internal:5432/app", pw),
                                p("redis://:", F.s(F.alnum, 20), "@cache:6379/0")],
            ["https://user:${PASSWORD}@host/x", "https://example.com:8080/path?a=b", "see http://host:80/@user",
             "cvs://:pserver:anoncvs@sources.redhat.com:/cvs/src"])
    }
    add("url-token", [p("git clone https://", F.s(F.alnum, 40), "@github.com/org/repo.git")],
        ["ssh://git@github.com/org/repo", "https://" + F.s(F.lower, 30) + "@host"])
    add("authorization-header", [p("curl -H 'Authorization: Bearer ", F.s(F.alnum, 40), "' https://api.x.com"),
                                 p("authorization: Basic ", F.s(F.b64, 24) + "=="),
                                 p("{\\\"Authorization\\\": \\\"Token ", F.s(F.alnum, 40), "\\\"}")],
        ["Authorization: Bearer $TOKEN", "authorization: required", "Authorization: Bearer <token>"])
    add("bearer-token", [p("using bearer ", F.s(F.b64url, 40))], ["the bearer of bad news", "Bearer ${API_TOKEN}"])
    add("api-key-header", [p("-H 'X-Api-Key: ", F.s(F.alnum, 32), "'"), p("PRIVATE-TOKEN: ", F.s(F.alnum, 20))],
        ["X-Api-Key: <your-key>", "x-api-key header is required"])
    do {
        let pw = F.password()
        add("curl-user-password", [("curl -u admin:" + pw + " https://x.com/api", pw), p("curl --user 'bob:", "s3cr3t-" + F.s(F.alnum, 5), "' x")],
            ["git push -u origin main", "sort -u file.txt", "curl -u admin:$PASS https://x"])
    }
    do {
        let pw = F.password()
        add("connection-string-password", [("Server=tcp:x.database.windows.net;Database=db;User Id=me;Password=" + pw + ";Encrypt=true", pw),
                                           p("Host=db;Username=u; Pwd=", "weak", ";")],
            ["Server=x;Password=${DB_PASS};", "Password=abc without a connection string"])
    }
    do {
        let pw = F.password()
        add("cli-secret-flag", [("mysql -u root --password=" + pw + " db", pw), p("gh auth login --token ", F.s(F.alnum, 30)),
                                p("vault login --db-password ", "hunter2")],
            ["--password-file /run/secrets/db", "cmd --token $TOKEN", "app --password --verbose",
             "decrypt without --try-secret-key or --default-key."])
    }
    do {
        let pw = F.password()
        add("generic-password", [("DB_PASSWORD=" + pw, pw), p("{\"password\": \"", "c0rrect-h0rse", "\"}"), p("password: ", "letmein"),
                                 p("MYSQL_ROOT_PASSWORD='", "s3cr3t p4ss", "'")],
            ["password: required", "Please enter your password to continue", "PASSWORD=${DB_PASSWORD}", "PWD=/home/user/project",
             "password_min_length: true", "DB_PASSWORD=$(cat /run/secrets/db)",
             "@NL80211_ATTR_SAE_PASSWORD: attribute for passing SAE password material",
             "\t* sm/passphrase.c: New file.", "* update-passwd.8: Document that backups are kept", "* agent/preset-passphrase.c: Ditto."])
    }
    do {
        let key = F.s(F.alnum, 24)
        add("generic-secret", [("API_KEY=" + key, key), p("{\"client_secret\": \"", F.s(F.alnum, 32), "\"}"),
                               p("secret_key_base: ", F.s(F.hex, 64)), p("apiKey = '", F.s(F.alnum, 20), "'"),
                               p("export MY_SERVICE_TOKEN=", F.s(F.b64url, 30))],
            ["token = get_token()", "key: value", "tokenizer = bert-base-uncased", "secret_name = prod-db-credentials",
             "token_url = https://oauth2.googleapis.com/token", "API_KEY=$API_KEY", "key: <your-key>",
             "secret: \"{{ .Values.secret }}\"", "token = os.environ[\"TOKEN\"]", "monkey=" + F.s(F.alnum, 20),
             "max_tokens: 4096", "auth: true", "keyboard_layout = qwerty-us", "secret_name = prod-db-2024",
             "region_key = us-east-1", "token_expiry = 2026-11-22T10:00:00Z", "cache_key: build_42_release",
             "** KEYWORDS: sqlite3_version sqlite3_sourceid", "NL80211_KEY_MAX = __NL80211_KEY_AFTER_LAST - 1"])
    }
    return c
}()

@Suite("Redaction catalog: every built-in rule, positive and negative cases")
struct RedactCatalogTests {
    let r = Redactor.builtIn

    @Test("the catalog has at least 40 rules, unique ids, and every rule has cases here")
    func everyRuleHasCases() {
        let ids = Redactor.catalog.map(\.id)
        #expect(ids.count >= 40)
        #expect(Set(ids).count == ids.count, "duplicate rule ids")
        let covered = Set(ruleCases.map(\.id))
        for id in ids {
            #expect(covered.contains(id), "catalog rule \(id) has no test case")
        }
        for id in covered {
            #expect(ids.contains(id), "test case for unknown rule \(id)")
        }
        for rc in ruleCases {
            #expect(!rc.positive.isEmpty && !rc.negative.isEmpty, "rule \(rc.id) needs positive and negative cases")
        }
    }

    @Test("positive cases are found, and the secret never reaches the output", arguments: ruleCases)
    func positive(_ rc: RuleCase) {
        for (text, secret) in rc.positive {
            let plain = r.redact(text)
            #expect(plain.findings.contains { $0.ruleId == rc.id }, "\(rc.id) missed: \(text.debugDescription) -> \(plain.findings)")
            #expect(!plain.text.contains(secret), "\(rc.id) leaked: \(plain.text.debugDescription)")
            #expect(plain.text.contains("[REDACTED]"))
            let labelled = r.redact(text, labels: true)
            #expect(labelled.text.contains("[REDACTED:\(rc.id)]"), "\(labelled.text.debugDescription)")
            // Findings are byte offsets of the input: the bytes there are the secret's.
            let utf8 = Array(text.utf8)
            if let f = plain.findings.first(where: { $0.ruleId == rc.id }) {
                #expect(f.start < f.end && f.end <= utf8.count)
                let found = String(decoding: utf8[f.start..<f.end], as: UTF8.self)
                #expect(found.contains(secret) || secret.contains(found), "offsets \(f) cover \(found.debugDescription)")
            }
        }
    }

    @Test("without JIT (PCRE2's interpreter, its depth/heap limits) every rule finds the same", arguments: ruleCases)
    func interpreterFallback(_ rc: RuleCase) throws {
        let interp = try Redactor(jit: false)
        #expect(!interp.usesJIT)
        for (text, _) in rc.positive {
            let a = r.redact(text, labels: true), b = interp.redact(text, labels: true)
            #expect(a.text == b.text && a.findings == b.findings, "\(rc.id): JIT \(a.findings) vs interpreter \(b.findings)")
            #expect(!b.findings.contains { $0.failSafe })
        }
        for text in rc.negative {
            #expect(r.redact(text).findings == interp.redact(text).findings)
        }
    }

    @Test("negative cases are left alone by the rule", arguments: ruleCases)
    func negative(_ rc: RuleCase) {
        for text in rc.negative {
            let out = r.redact(text)
            #expect(!out.findings.contains { $0.ruleId == rc.id }, "\(rc.id) false positive on \(text.debugDescription) -> \(out.text.debugDescription)")
        }
    }
}
