import BridgeCore

extension PushPayloads {
    /// `payload` within `limit` bytes of JSON: the strings at `paths` are
    /// halved in that order, each down to `floor` characters (a whole object
    /// at a path is emptied at its turn), never the structure, so the push
    /// still goes (shortened, never dropped). Cuts fall on grapheme
    /// boundaries and end with "…".
    static func fit(_ payload: JSON, limit: Int, shrinking paths: [(path: [String], floor: Int)]) -> JSON {
        fitEncoded(payload, limit: limit, shrinking: paths).payload
    }

    /// `fit`, and the fitted payload's JSON text (encoded once: the size
    /// check's encoding is what gets stored and sent).
    static func fitEncoded(_ payload: JSON, limit: Int, shrinking paths: [(path: [String], floor: Int)]) -> (payload: JSON, body: [UInt8]) {
        let first = payload.encoded
        if first.count <= limit { return (payload, first) }
        var p = payload
        for (path, floor) in paths {
            while p.encoded.count > limit {
                guard let v = value(p, at: path[...]) else { break }
                switch v {
                case .string(let s) where s.count > floor:
                    p = replacing(p, at: path[...], with: .string(halve(s, floor: floor)))
                case .object(let o) where !o.isEmpty:
                    p = replacing(p, at: path[...], with: .object([:]))
                default:
                    break
                }
                if value(p, at: path[...]) == v { break }
            }
            if p.encoded.count <= limit { break }
        }
        return (p, p.encoded)
    }

    static func halve(_ s: String, floor: Int) -> String {
        let keep = max(s.count / 2, floor)
        return keep <= 1 ? "" : String(s.prefix(keep - 1)) + "…"
    }

    private static func value(_ j: JSON, at path: ArraySlice<String>) -> JSON? {
        guard let k = path.first else { return j }
        guard let next = j[k] else { return nil }
        return value(next, at: path.dropFirst())
    }

    private static func replacing(_ j: JSON, at path: ArraySlice<String>, with new: JSON) -> JSON {
        guard let k = path.first else { return new }
        guard var o = j.objectValue, let child = o[k] else { return j }
        o[k] = replacing(child, at: path.dropFirst(), with: new)
        return .object(o)
    }
}
