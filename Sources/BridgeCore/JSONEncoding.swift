/// Compact JSON text straight from Swift values, without building a jansson
/// tree first: the RPC reply path (every Swift-handled result) writes these
/// bytes directly into the response. Same escaping as jansson's defaults:
/// `"`, `\` and control characters are escaped, everything else is UTF-8 as is.
/// Non-finite doubles become null (JSON has no NaN/Infinity).
extension JSON {
    public func encode(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(let b):
            if b { out.append(contentsOf: [0x74, 0x72, 0x75, 0x65]) }
            else { out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65]) }
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if d.isFinite { out.append(contentsOf: d.description.utf8) }
            else { out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }
        case .string(let s): JSON.encodeString(s, into: &out)
        case .array(let a):
            out.append(0x5B)
            var first = true
            for e in a {
                if !first { out.append(0x2C) }
                first = false
                e.encode(into: &out)
            }
            out.append(0x5D)
        case .object(let o):
            out.append(0x7B)
            var first = true
            for (k, v) in o {
                if !first { out.append(0x2C) }
                first = false
                JSON.encodeString(k, into: &out)
                out.append(0x3A)
                v.encode(into: &out)
            }
            out.append(0x7D)
        }
    }

    public var encoded: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(64)
        encode(into: &out)
        return out
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    static func encodeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        var s = s
        s.withUTF8 { buf in
            var start = 0
            for i in 0..<buf.count {
                let c = buf[i]
                if c >= 0x20 && c != 0x22 && c != 0x5C { continue }
                if start < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[start..<i])) }
                start = i + 1
                switch c {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, 0x6E])
                case 0x0D: out.append(contentsOf: [0x5C, 0x72])
                case 0x09: out.append(contentsOf: [0x5C, 0x74])
                case 0x08: out.append(contentsOf: [0x5C, 0x62])
                case 0x0C: out.append(contentsOf: [0x5C, 0x66])
                default:
                    out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 0xF)]])
                }
            }
            if start < buf.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[start..<buf.count])) }
        }
        out.append(0x22)
    }
}
