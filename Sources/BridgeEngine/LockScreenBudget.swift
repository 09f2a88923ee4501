extension LockScreenGate {
    /// Step 3's bound on a whole payload: what the JSON encoding of a
    /// notification or Live Activity content would weigh (text fields plus a
    /// frame for keys, numbers and punctuation, with room to spare), brought
    /// under `maxPayloadBytes` by halving the longest text field until it fits.
    /// Ids stay whole: the contract bounds them (128 characters each).
    enum Budget {
        static func fit(_ c: ActivityContent) -> ActivityContent {
            var c = c
            let fixed = 640 + cost(c.sessionId) + cost(c.device ?? "") + cost(c.approval?.requestId ?? "")
            shrink(&c, fixed: fixed, activityText, activityOptionalText)
            return c
        }

        // Key paths are built once: made per call, they cost more than the fitting.
        static let activityText: [WritableKeyPath<ActivityContent, String>] =
            [\.rendered.lockScreen, \.rendered.expanded, \.rendered.compact, \.projectName, \.statusText]
        static let activityOptionalText: [WritableKeyPath<ActivityContent, String?>] =
            [\.projectPath, \.operation, \.currentTodo, \.progressText, \.message, \.approvalSummary, \.approvalTool]
        static let notificationText: [WritableKeyPath<NotificationRequest, String>] = [\.title, \.body]
        static let notificationInfo: [WritableKeyPath<NotificationRequest, String?>] = cuttableInfo.map { \.userInfo[$0] }

        static func fit(_ n: NotificationRequest) -> NotificationRequest {
            var n = n
            var fixed = 512 + cost(n.id) + cost(n.threadId) + cost(n.deepLink)
            for a in n.actions { fixed += 96 + cost(a.id) + cost(a.title) }
            for (k, v) in n.userInfo { fixed += cost(k) + 2 + (cuttableInfo.contains(k) ? 0 : cost(v)) }
            shrink(&n, fixed: fixed, notificationText, notificationInfo)
            return n
        }

        static let cuttableInfo = ["projectPath", "toolName"]

        /// A string's JSON size: its bytes, the quotes, one more per escaped character.
        static func cost(_ s: String) -> Int {
            var n = s.utf8.count + 2
            for b in s.utf8 where b == 0x22 || b == 0x5c || b < 0x20 { n += b < 0x20 ? 5 : 1 }
            return n
        }

        private static func shrink<T>(_ v: inout T, fixed: Int, _ plain: [WritableKeyPath<T, String>],
                                      _ optional: [WritableKeyPath<T, String?>]) {
            // Each round halves a field longer than 16 bytes, so this ends.
            while true {
                var total = fixed
                var longest: (cost: Int, plain: Int?, optional: Int?) = (16, nil, nil)
                for (i, kp) in plain.enumerated() {
                    let c = cost(v[keyPath: kp])
                    total += c
                    if c > longest.cost { longest = (c, i, nil) }
                }
                for (i, kp) in optional.enumerated() {
                    guard let s = v[keyPath: kp] else { continue }
                    let c = cost(s)
                    total += c
                    if c > longest.cost { longest = (c, nil, i) }
                }
                guard total > LockScreenGate.maxPayloadBytes else { return }
                if let i = longest.plain {
                    v[keyPath: plain[i]] = halved(v[keyPath: plain[i]])
                } else if let i = longest.optional, let s = v[keyPath: optional[i]] {
                    v[keyPath: optional[i]] = halved(s)
                } else {
                    return
                }
            }
        }

        private static func halved(_ s: String) -> String {
            Privacy.truncate(s, to: max(1, s.count / 2), bytes: max(4, s.utf8.count / 2))
        }
    }
}

/// Writable paths into the optional parts (optional-chaining key paths are read-only).
private extension ActivityContent {
    var currentTodo: String? {
        get { progress?.current }
        set { progress?.current = newValue }
    }
    var approvalSummary: String? {
        get { approval?.summary }
        set { if let v = newValue { approval?.summary = v } }
    }
    var approvalTool: String? {
        get { approval?.toolName }
        set { if let v = newValue { approval?.toolName = v } }
    }
}
