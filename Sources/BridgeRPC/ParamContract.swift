import BridgeCore

/// What rpc-spec/openrpc.json says about a method's params, enforced before
/// its handler runs, so the contract and the server cannot drift apart:
/// names the method does not declare (-32602 with `data.unknown`), numbers
/// outside `minimum`/`maximum`, strings outside `minLength`/`maxLength` or
/// with control characters where the spec's `pattern` forbids them (ids).
/// Nested objects and array items are checked the same way. Types and enums
/// stay with the handlers, whose errors already name the param; a value of
/// another type than declared is left to them.
struct ParamContract {
    /// The one `pattern` the contract uses (the `Id` schema): no C0 control
    /// character, no DEL. Any other pattern stops the server at startup, so
    /// the spec never promises a check nobody makes.
    static let noControlPattern = "^[^\\u0000-\\u001f\\u007f]+$"

    struct Method {
        var params: [String: Schema] = [:]
        /// `x-additionalParams`: adapters take the agent's own payload, whose
        /// fields grow with every agent release.
        var openEnded = false
    }

    private let methods: [String: Method]

    /// The contract compiled in (the document `rpc.discover` serves).
    static let standard = ParamContract(document: JSON.parse(OpenRPCDocument.text) ?? .null)

    init(document: JSON) {
        let schemas = document["components"]?["schemas"]?.objectValue ?? [:]
        var out: [String: Method] = [:]
        for m in document["methods"]?.arrayValue ?? [] {
            guard let name = m["name"]?.stringValue else { continue }
            var method = Method(openEnded: m["x-additionalParams"]?.boolValue == true)
            for p in m["params"]?.arrayValue ?? [] {
                guard let pn = p["name"]?.stringValue else { continue }
                method.params[pn] = Schema(p["schema"] ?? .null, schemas, depth: 0)
            }
            out[name] = method
        }
        methods = out
    }

    /// Throws the -32602 for the first thing `params` breaks; nothing for a
    /// method the contract does not describe (the dispatcher answers those).
    func check(_ method: String, _ params: JSON?) throws {
        guard let m = methods[method], case .object(let given)? = params else { return }
        if !m.openEnded {
            let unknown = given.keys.filter { m.params[$0] == nil }
            if !unknown.isEmpty { throw Self.unknownParams(unknown.sorted(), known: m.params.keys.sorted()) }
        }
        for (name, value) in given {
            if let s = m.params[name], !s.isTrivial { try s.check(value, at: name) }
        }
    }

    private static func unknownParams(_ unknown: [String], known: [String]) -> RPCError {
        let list = unknown.map { "'\($0)'" }.joined(separator: ", ")
        return .invalidParams("invalid params: unknown \(unknown.count == 1 ? "param" : "params") \(list)",
                              data: ["param": .string(unknown[0]), "unknown": .array(unknown.map { .string($0) }),
                                     "expected": .array(known.map { .string($0) }), "got": "unknown name"])
    }
}
