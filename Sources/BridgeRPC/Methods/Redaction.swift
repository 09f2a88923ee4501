import BridgeCore

extension MethodTable {
    /// Secret redaction for anything shown outside the terminal.
    func registerRedaction(_ env: ServerEnvironment) {
        // {text, mode?, labels?, showDetails?} -> {text, findings, truncated, failSafe}
        // mode "full" (default): the whole text, redacted.
        // mode "lockScreen": what a locked phone may show. Details are off by
        // default, as the seed setting showNotificationDetails is: the generic
        // text comes back. showDetails: true gives the redacted text cut to 200
        // characters. Findings are always reported, with UTF-8 byte offsets
        // into the input text.
        // Texts above this size are redacted on libuv's thread pool so the
        // loop keeps serving (a 16 MiB message takes tens of milliseconds).
        let offLoopBytes = 256 << 10
        onAsync("redact") { p, _, reply in
            let text: String = try p.required("text")
            let mode = try p.oneOf("mode", ["full", "lockScreen"], default: "full")
            let labels: Bool = try p.optional("labels") ?? false
            let showDetails: Bool = try p.optional("showDetails") ?? false
            let redactor = env.redactor
            let work = { () -> JSON in
                let out: String, findings: [RedactionFinding], truncated: Bool
                if mode == "lockScreen" {
                    (out, findings, truncated) = redactor.lockScreen(text, showDetails: showDetails, labels: labels)
                } else {
                    (out, findings) = redactor.redact(text, labels: labels)
                    truncated = false
                }
                return [
                    "text": .string(out),
                    "findings": .array(findings.map {
                        ["ruleId": .string($0.ruleId), "start": .int(Int64($0.start)), "end": .int(Int64($0.end))]
                    }),
                    "truncated": .bool(truncated),
                    "failSafe": .bool(findings.contains { $0.failSafe }),
                ]
            }
            if text.utf8.count < offLoopBytes {
                reply(.success(work()))
            } else {
                env.loop.runOffLoop(work) { reply(.success($0)) }
            }
        }

        // {} -> {rules: [{id, description, builtIn}], jit}
        on("redact.rules") { _, _ in
            let catalog = Dictionary(Redactor.catalog.map { ($0.id, $0.description) }, uniquingKeysWith: { a, _ in a })
            let ids = env.redactor.ruleIds
            return [
                "rules": .array(ids.enumerated().map { i, id in
                    let builtIn = i < catalog.count
                    return ["id": .string(id), "description": .string(builtIn ? catalog[id] ?? "" : "custom rule"),
                            "builtIn": .bool(builtIn)]
                }),
                "jit": .bool(env.redactor.usesJIT),
            ]
        }
    }
}
