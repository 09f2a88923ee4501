/// EDGE-CASES "Deep Link Routes":
///   codingbridge://session/{id}
///   codingbridge://session/{id}/approval/{requestId}
///   codingbridge://session/{id}/question/{questionId}
///   codingbridge://settings/notifications
/// Ids are percent-encoded so any id (with `/`, spaces, unicode) round-trips.
public enum DeepLink: Equatable, Sendable {
    case session(id: String)
    case approval(sessionId: String, requestId: String)
    case question(sessionId: String, questionId: String)
    case notificationSettings

    public static let scheme = "codingbridge"

    public var url: String {
        switch self {
        case .session(let id): return "codingbridge://session/\(Self.encode(id))"
        case .approval(let s, let r): return "codingbridge://session/\(Self.encode(s))/approval/\(Self.encode(r))"
        case .question(let s, let q): return "codingbridge://session/\(Self.encode(s))/question/\(Self.encode(q))"
        case .notificationSettings: return "codingbridge://settings/notifications"
        }
    }

    public var routeName: String {
        switch self {
        case .session: return "session"
        case .approval: return "approval"
        case .question: return "question"
        case .notificationSettings: return "notificationSettings"
        }
    }

    public enum ParseError: Error, Equatable, Sendable {
        case notCodingBridge
        case unknownRoute(String)
        case badEncoding(String)
    }

    public static func parse(_ text: String) -> Result<DeepLink, ParseError> {
        let prefix = "codingbridge://"
        guard text.count > prefix.count, text.lowercased().hasPrefix(prefix) else { return .failure(.notCodingBridge) }
        var rest = Substring(text.dropFirst(prefix.count))
        // Query and fragment carry nothing we route on.
        if let q = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<q] }
        var parts = rest.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if parts.last == "" { parts.removeLast() }  // trailing slash
        var decoded: [String] = []
        for p in parts {
            guard !p.isEmpty, let d = decode(p) else { return .failure(.badEncoding(p)) }
            decoded.append(d)
        }
        switch decoded.count {
        case 2 where parts[0] == "settings" && parts[1] == "notifications": return .success(.notificationSettings)
        case 2 where parts[0] == "session": return .success(.session(id: decoded[1]))
        case 4 where parts[0] == "session" && parts[2] == "approval":
            return .success(.approval(sessionId: decoded[1], requestId: decoded[3]))
        case 4 where parts[0] == "session" && parts[2] == "question":
            return .success(.question(sessionId: decoded[1], questionId: decoded[3]))
        default: return .failure(.unknownRoute(String(rest)))
        }
    }

    // RFC 3986 unreserved characters stay; every other byte becomes %XX.
    static func encode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(b >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(b & 15)]))
            }
        }
        return out
    }

    /// nil on a malformed escape or bytes that are not UTF-8.
    static func decode(_ s: String) -> String? {
        var bytes: [UInt8] = []
        var it = Array(s.utf8)[...]
        func hexval(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while let c = it.popFirst() {
            if c == UInt8(ascii: "%") {
                guard let h = it.popFirst(), let l = it.popFirst(), let hv = hexval(h), let lv = hexval(l) else { return nil }
                bytes.append(hv << 4 | lv)
            } else {
                bytes.append(c)
            }
        }
        var result = ""
        var decoder = UTF8()
        var iter = bytes.makeIterator()
        loop: while true {
            switch decoder.decode(&iter) {
            case .scalarValue(let v): result.unicodeScalars.append(v)
            case .emptyInput: break loop
            case .error: return nil
            }
        }
        return result
    }
}
