import BridgeCore

extension ParamContract {
    /// The checkable part of one JSON Schema: bounds, lengths, the id
    /// pattern, and the same for properties and items. `$ref`s are resolved
    /// when the contract is compiled.
    struct Schema {
        var minimum: Double?
        var maximum: Double?
        var integer = false
        var minLength: Int?
        var maxLength: Int?
        var noControl = false
        var properties: [String: Schema] = [:]
        /// `additionalProperties: false`: an undeclared property is an error.
        var closed = false
        var items: [Schema] = []

        var isTrivial: Bool {
            minimum == nil && maximum == nil && minLength == nil && maxLength == nil && !noControl
                && properties.isEmpty && !closed && items.isEmpty
        }

        init(_ raw: JSON, _ schemas: [String: JSON], depth: Int) {
            var s = raw
            if let ref = s["$ref"]?.stringValue, let name = ref.split(separator: "/").last {
                s = schemas[String(name)] ?? .null
            }
            // Recursive schemas are not in the contract; a bound keeps a future one finite.
            guard depth < 8, case .object(let o) = s else { return }
            minimum = o["minimum"]?.doubleValue
            maximum = o["maximum"]?.doubleValue
            integer = o["type"]?.stringValue == "integer"
            minLength = o["minLength"]?.intValue.map { Int($0) }
            maxLength = o["maxLength"]?.intValue.map { Int($0) }
            if let p = o["pattern"]?.stringValue {
                precondition(p == ParamContract.noControlPattern, "rpc-spec: unsupported pattern \(p)")
                noControl = true
            }
            for (k, v) in o["properties"]?.objectValue ?? [:] { properties[k] = Schema(v, schemas, depth: depth + 1) }
            closed = o["additionalProperties"]?.boolValue == false
            if let i = o["items"] { items = [Schema(i, schemas, depth: depth + 1)] }
        }

        func check(_ v: JSON, at path: String) throws {
            switch v {
            case .int, .double: try checkNumber(v, at: path)
            case .string(let str): try checkString(str, at: path)
            case .object(let o):
                if closed, let extra = o.keys.filter({ properties[$0] == nil }).sorted().first {
                    throw RPCError.invalidParams("invalid params: unknown param '\(path).\(extra)'",
                                                 data: ["param": .string("\(path).\(extra)"), "unknown": [.string("\(path).\(extra)")],
                                                        "expected": .array(properties.keys.sorted().map { .string($0) }),
                                                        "got": "unknown name"])
                }
                for (k, x) in o { if let s = properties[k], !s.isTrivial { try s.check(x, at: "\(path).\(k)") } }
            case .array(let a):
                guard let item = items.first, !item.isTrivial else { return }
                for (i, x) in a.enumerated() { try item.check(x, at: "\(path)[\(i)]") }
            default: return
            }
        }

        private func checkNumber(_ v: JSON, at path: String) throws {
            guard minimum != nil || maximum != nil, let d = v.doubleValue else { return }
            // A fraction where an integer is due is the handler's type error.
            if integer, case .double(let x) = v, x.rounded() != x { return }
            if let lo = minimum, d < lo { throw outOfRange(v, at: path) }
            if let hi = maximum, d > hi { throw outOfRange(v, at: path) }
            // 2^63 and above parse as doubles that compare equal to a 2^53-ish bound only by rounding.
            if integer, case .double(let x) = v, abs(x) >= 9.2e18 { throw outOfRange(v, at: path) }
        }

        private func outOfRange(_ v: JSON, at path: String) -> RPCError {
            let range = "[\(Self.text(minimum)), \(Self.text(maximum))]"
            var data: [String: JSON] = ["param": .string(path), "expected": .string("\(integer ? "integer" : "number") in \(range)"),
                                        "got": v]
            if let lo = minimum { data["minimum"] = Self.json(lo) }
            if let hi = maximum { data["maximum"] = Self.json(hi) }
            return .invalidParams("invalid params: '\(path)' out of range \(range)", data: .object(data))
        }

        static func json(_ bound: Double) -> JSON {
            bound.rounded() == bound && abs(bound) <= 9007199254740992 ? .int(Int64(bound)) : .double(bound)
        }

        static func text(_ bound: Double?) -> String {
            guard let b = bound else { return "unbounded" }
            if b.rounded() == b, abs(b) < 1e16 { return String(Int64(b)) }
            return "\(b)"
        }

        private func checkString(_ s: String, at path: String) throws {
            if s.isEmpty, (minLength ?? 0) > 0 {
                throw RPCError.invalidParams("invalid params: '\(path)' must not be empty",
                                             data: ["param": .string(path), "expected": "non-empty string", "got": "empty string"])
            }
            // Code points never outnumber UTF-8 bytes: count them only when the byte count is over.
            if let hi = maxLength, s.utf8.count > hi, s.unicodeScalars.count > hi { throw badLength(s, at: path) }
            if let lo = minLength, s.utf8.count < lo || s.unicodeScalars.count < lo { throw badLength(s, at: path) }
            guard noControl, let at = s.utf8.firstIndex(where: { $0 < 0x20 || $0 == 0x7f }) else { return }
            let offset = s.utf8.distance(from: s.utf8.startIndex, to: at)
            throw RPCError.invalidParams("invalid params: '\(path)' must not contain control characters",
                                         data: ["param": .string(path), "expected": "no control characters",
                                                "got": .string("U+00\(s.utf8[at] < 0x10 ? "0" : "")\(String(s.utf8[at], radix: 16, uppercase: true)) at byte \(offset)")])
        }

        private func badLength(_ s: String, at path: String) -> RPCError {
            let want = "\(minLength ?? 0) to \(maxLength.map(String.init) ?? "any number of") characters"
            return .invalidParams("invalid params: '\(path)' must be \(want)",
                                  data: ["param": .string(path), "expected": .string("string of \(want)"),
                                         "got": .string("string of \(s.unicodeScalars.count) characters"),
                                         "minLength": .int(Int64(minLength ?? 0)),
                                         "maxLength": maxLength.map { .int(Int64($0)) } ?? .null])
        }
    }
}
