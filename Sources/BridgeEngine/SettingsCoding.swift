import BridgeCore

/// A setting that does not fit: the message and data of the -32602 the RPC
/// layer answers with (`param`, `expected`, `got`).
public struct SettingsError: Error, Equatable, Sendable {
    public var message: String
    public var data: JSON
}

/// The one JSON form of the settings (EDGE-CASES "User Settings"): what
/// `settings.get` returns, what `settings.update` takes (any subset of the
/// keys), and what the durable snapshot keeps.
extension Settings {
    /// How one setting is read from and written to JSON.
    private struct Field: Sendable {
        let key: String
        let encode: @Sendable (Settings) -> JSON
        let decode: @Sendable (inout Settings, JSON) throws(SettingsError) -> Void
    }

    private static func flag(_ key: String, _ path: WritableKeyPath<Settings, Bool> & Sendable) -> Field {
        Field(key: key, encode: { .bool($0[keyPath: path]) }) { s, v throws(SettingsError) in
            guard let b = v.boolValue else { throw mismatch(key, "boolean", v) }
            s[keyPath: path] = b
        }
    }

    /// In the order `settings.update` checks and lists them (the first problem is reported).
    private static let fields: [Field] = [
        flag("enableLiveActivities", \.enableLiveActivities),
        flag("enableBackgroundNotifications", \.enableBackgroundNotifications),
        flag("showNotificationDetails", \.showNotificationDetails),
        flag("backgroundInLowPowerMode", \.backgroundInLowPowerMode),
        flag("enableTimeSensitiveNotifications", \.enableTimeSensitiveNotifications),
        Field(key: "approvalTimeoutSeconds", encode: { .double($0.approvalTimeoutSeconds) }) { s, v throws(SettingsError) in
            guard let d = v.doubleValue else { throw mismatch("approvalTimeoutSeconds", "number", v) }
            guard approvalTimeoutRange.contains(d) else {
                throw SettingsError(message: "invalid params: 'approvalTimeoutSeconds' must be within 1...86400",
                                    data: ["param": "approvalTimeoutSeconds", "expected": "number 1...86400", "got": .double(d)])
            }
            s.approvalTimeoutSeconds = d
        },
        Field(key: "customRedactionRules", encode: { s in
            .array(s.customRedactionRules.map { ["name": .string($0.name), "pattern": .string($0.pattern), "replacement": .string($0.replacement)] })
        }) { s, v throws(SettingsError) in s.customRedactionRules = try rules(v) },
        Field(key: "locale", encode: { .string($0.locale) }) { s, v throws(SettingsError) in
            guard let l = v.stringValue else { throw mismatch("locale", "string", v) }
            guard Localization.isSupported(l) else {
                throw SettingsError(message: "invalid params: unsupported locale '\(l)'",
                                    data: ["param": "locale", "expected": .array(Localization.supportedLocales.map { .string($0) }),
                                           "got": .string(l)])
            }
            s.locale = l
        },
    ]

    public static let keys = fields.map(\.key)

    private static func mismatch(_ param: String, _ expected: String, _ got: JSON) -> SettingsError {
        SettingsError(message: "invalid params: '\(param)' must be \(expected)",
                      data: ["param": .string(param), "expected": .string(expected), "got": .string(got.typeName)])
    }

    private static func rules(_ v: JSON) throws(SettingsError) -> [RedactionRule] {
        guard let arr = v.arrayValue else { throw mismatch("customRedactionRules", "array", v) }
        var rules: [RedactionRule] = []
        for (i, r) in arr.enumerated() {
            guard let o = r.objectValue else { throw mismatch("customRedactionRules[\(i)]", "object", r) }
            guard let pattern = o["pattern"]?.stringValue, !pattern.isEmpty else {
                throw mismatch("customRedactionRules[\(i)].pattern", "non-empty string", o["pattern"] ?? .null)
            }
            rules.append(RedactionRule(name: o["name"]?.stringValue ?? "custom\(i + 1)", pattern: pattern,
                                       replacement: o["replacement"]?.stringValue ?? "[REDACTED]"))
        }
        return rules
    }

    public var json: JSON {
        var o: [String: JSON] = [:]
        for f in Self.fields { o[f.key] = f.encode(self) }
        return .object(o)
    }

    /// From the durable snapshot: a value missing or no longer valid keeps
    /// its default, so an older document still loads.
    public init(json: JSON) {
        self.init()
        for f in Self.fields {
            guard let v = json[f.key], v != .null else { continue }
            var s = self
            do throws(SettingsError) { try f.decode(&s, v); self = s } catch {}
        }
    }

    /// These settings with the keys of `update` applied (`settings.update`;
    /// null means unchanged). Nothing changes if any key is unknown or wrong.
    public func updated(with update: [String: JSON]) throws(SettingsError) -> Settings {
        if let unknown = update.keys.sorted().first(where: { !Self.keys.contains($0) }) {
            throw SettingsError(message: "invalid params: unknown setting '\(unknown)'",
                                data: ["param": .string(unknown), "expected": .array(Self.keys.map { .string($0) }), "got": "unknown key"])
        }
        var s = self
        for f in Self.fields {
            guard let v = update[f.key], v != .null else { continue }
            try f.decode(&s, v)
        }
        return s
    }
}
