import CJansson

/// A JSON value as Swift sees it. Everything crossing the C boundary as JSON
/// becomes this type, so no `json_t` ever leaks past BridgeCore.
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral v: String) { self = .string(v) }
    public init(integerLiteral v: Int64) { self = .int(v) }
    public init(booleanLiteral v: Bool) { self = .bool(v) }
    public init(floatLiteral v: Double) { self = .double(v) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral pairs: (String, JSON)...) {
        self = .object(Dictionary(pairs, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSON {
    public subscript(key: String) -> JSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a }; return nil }
    public var objectValue: [String: JSON]? { if case .object(let o) = self { return o }; return nil }
    /// The JSON type name, for error messages ("expected string, got array").
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int: return "integer"
        case .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

// MARK: - jansson bridge (BridgeCore-internal use and the RPC transport)

extension JSON {
    /// Builds a Swift value from a borrowed jansson value (the caller keeps its reference).
    package init(borrowing p: UnsafeMutablePointer<json_t>?) {
        guard let p else { self = .null; return }
        switch p.pointee.type {
        case JSON_OBJECT:
            var o = [String: JSON](minimumCapacity: json_object_size(p))
            var it = json_object_iter(p)
            while let i = it {
                let k = String(cString: json_object_iter_key(i))
                o[k] = JSON(borrowing: json_object_iter_value(i))
                it = json_object_iter_next(p, i)
            }
            self = .object(o)
        case JSON_ARRAY:
            let n = json_array_size(p)
            var a = [JSON]()
            a.reserveCapacity(n)
            for i in 0..<n { a.append(JSON(borrowing: json_array_get(p, i))) }
            self = .array(a)
        case JSON_STRING:
            // jansson strings may hold NUL (\u0000); use the explicit length.
            let len = json_string_length(p)
            let bytes = UnsafeRawBufferPointer(start: json_string_value(p), count: len)
            self = .string(String(decoding: bytes, as: UTF8.self))
        case JSON_INTEGER: self = .int(Int64(json_integer_value(p)))
        case JSON_REAL: self = .double(json_real_value(p))
        case JSON_TRUE: self = .bool(true)
        case JSON_FALSE: self = .bool(false)
        default: self = .null
        }
    }

    /// A new jansson value holding one reference, owned by the caller.
    package func makeJanssonValue() -> UnsafeMutablePointer<json_t> {
        switch self {
        case .null: return json_null()
        case .bool(let b): return b ? json_true() : json_false()
        case .int(let i): return json_integer(json_int_t(i))
        case .double(let d):
            // JSON has no NaN/Infinity; jansson refuses them, so they become null.
            return (d.isFinite ? json_real(d) : nil) ?? json_null()
        case .string(let s):
            var s = s
            return s.withUTF8 { buf in
                buf.withMemoryRebound(to: CChar.self) { b in
                    // An empty String may have no storage address; jansson needs one.
                    b.baseAddress.flatMap { json_stringn_nocheck($0, b.count) } ?? json_string_nocheck("")!
                }
            }
        case .array(let a):
            let arr = json_array()
            for e in a { json_array_append_new(arr, e.makeJanssonValue()) }
            return arr!
        case .object(let o):
            let obj = json_object()
            for (k, v) in o { json_object_set_new_nocheck(obj, k, v.makeJanssonValue()) }
            return obj!
        }
    }

    /// Compact JSON text.
    public func serialized() -> String {
        let v = makeJanssonValue()
        defer { json_decref(v) }
        guard let s = json_dumps(v, Int(JSON_COMPACT | JSON_ENCODE_ANY)) else { return "null" }
        defer { free(s) }
        return String(cString: s)
    }

    /// Parses JSON text; nil when it is not valid JSON.
    public static func parse(_ text: String) -> JSON? {
        var err = json_error_t()
        var text = text
        return text.withUTF8 { buf -> JSON? in
            let loaded = buf.withMemoryRebound(to: CChar.self) {
                json_loadb($0.baseAddress, $0.count, Int(JSON_DECODE_ANY | JSON_ALLOW_NUL), &err)
            }
            guard let v = loaded else { return nil }
            defer { json_decref(v) }
            return JSON(borrowing: v)
        }
    }
}
