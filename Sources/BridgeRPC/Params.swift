import BridgeCore

/// Typed access to a request's params. Every failure is a -32602 whose `data`
/// names the parameter and what was expected, so clients can fix the call.
public struct Params {
    public let raw: JSON?
    private let object: [String: JSON]

    public init(_ raw: JSON?) throws {
        self.raw = raw
        switch raw {
        case nil, .null?: object = [:]
        case .object(let o)?: object = o
        case .array(let a)? where a.isEmpty: object = [:]
        case let other?:
            throw RPCError.invalidParams("params must be an object",
                                         data: ["expected": "object", "got": .string(other.typeName)])
        }
    }

    public func has(_ key: String) -> Bool { object[key] != nil && object[key] != .null }

    public func value(_ key: String) -> JSON? {
        guard let v = object[key], v != .null else { return nil }
        return v
    }

    private func mismatch(_ key: String, _ expected: String, _ got: JSON) -> RPCError {
        .invalidParams("invalid params: '\(key)' must be \(expected)",
                       data: ["param": .string(key), "expected": .string(expected), "got": .string(got.typeName)])
    }

    public func required<T: ParamConvertible>(_ key: String, as: T.Type = T.self) throws -> T {
        guard let v = value(key) else {
            throw RPCError.invalidParams("invalid params: missing '\(key)'",
                                         data: ["param": .string(key), "expected": .string(T.paramTypeName), "got": "missing"])
        }
        guard let t = T(param: v) else { throw mismatch(key, T.paramTypeName, v) }
        return t
    }

    public func optional<T: ParamConvertible>(_ key: String, as: T.Type = T.self) throws -> T? {
        guard let v = value(key) else { return nil }
        guard let t = T(param: v) else { throw mismatch(key, T.paramTypeName, v) }
        return t
    }

    /// A required string that must not be empty (ids, session ids).
    public func nonEmpty(_ key: String) throws -> String {
        let s: String = try required(key)
        guard !s.isEmpty else {
            throw RPCError.invalidParams("invalid params: '\(key)' must not be empty",
                                         data: ["param": .string(key), "expected": "non-empty string", "got": "empty string"])
        }
        return s
    }

    /// A string restricted to a fixed set of values (an enum in the OpenRPC spec).
    public func oneOf(_ key: String, _ allowed: [String], default def: String? = nil) throws -> String {
        guard let v = value(key) else {
            if let def { return def }
            return try required(key)
        }
        guard let s = v.stringValue, allowed.contains(s) else {
            throw RPCError.invalidParams("invalid params: '\(key)' must be one of \(allowed.joined(separator: ", "))",
                                         data: ["param": .string(key), "expected": .array(allowed.map { .string($0) }),
                                                "got": v.stringValue.map { .string($0) } ?? .string(v.typeName)])
        }
        return s
    }
}

public protocol ParamConvertible {
    init?(param: JSON)
    static var paramTypeName: String { get }
}
extension String: ParamConvertible {
    public init?(param: JSON) { guard let s = param.stringValue else { return nil }; self = s }
    public static var paramTypeName: String { "string" }
}
extension Bool: ParamConvertible {
    public init?(param: JSON) { guard let b = param.boolValue else { return nil }; self = b }
    public static var paramTypeName: String { "boolean" }
}
extension Int: ParamConvertible {
    public init?(param: JSON) { guard let i = param.intValue, let v = Int(exactly: i) else { return nil }; self = v }
    public static var paramTypeName: String { "integer" }
}
extension Int64: ParamConvertible {
    public init?(param: JSON) { guard let i = param.intValue else { return nil }; self = i }
    public static var paramTypeName: String { "integer" }
}
extension Double: ParamConvertible {
    public init?(param: JSON) { guard let d = param.doubleValue else { return nil }; self = d }
    public static var paramTypeName: String { "number" }
}
extension JSON: ParamConvertible {
    public init?(param: JSON) { self = param }
    public static var paramTypeName: String { "any" }
}
extension Array: ParamConvertible where Element == JSON {
    public init?(param: JSON) { guard let a = param.arrayValue else { return nil }; self = a }
    public static var paramTypeName: String { "array" }
}
extension Dictionary: ParamConvertible where Key == String, Value == JSON {
    public init?(param: JSON) { guard let o = param.objectValue else { return nil }; self = o }
    public static var paramTypeName: String { "object" }
}

extension Params {
    /// The acting device: `deviceId` when given (an `Id` in the contract, so
    /// never empty), else the connection's named device (its `initialize`
    /// deviceId; not a generated one). A paired device may act only as
    /// itself: naming another is refused.
    func deviceId(or ctx: RPCContext) throws -> String? {
        guard let d: String = try optional("deviceId") else { return ctx.namedDevice }
        if let paired = ctx.pairedDevice, d != paired { throw RPCError.otherDevice(d, paired) }
        return d
    }
}
