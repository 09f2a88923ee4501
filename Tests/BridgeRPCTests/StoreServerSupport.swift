import BridgeCore
import BridgeRPC
import Glibc

/// A fresh state directory, /tmp/<prefix>-XXXXXX, removed with all in it when
/// the last reference goes: it outlives the servers that use it.
final class TempStateDir {
    let path: String
    init(_ prefix: String) {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }
    deinit { _ = Glibc.system("rm -rf '\(path)'") }
}

/// A server on a durable store in `dir`, its clock driven by hand, its log quiet.
func makeStoreServer(_ dir: TempStateDir, alwaysWaitForApproval: Bool = false) throws -> RPCServer {
    var o = ServerOptions()
    o.stateDirectory = dir.path
    o.manualClock = true
    o.logLevel = .error
    o.alwaysWaitForApproval = alwaysWaitForApproval
    return try RPCServer(env: ServerEnvironment(loop: EventLoop(), options: o))
}

extension InProcessClient {
    /// Sends request `id`; the messages that came back at once.
    func sendRequest(_ id: Int64, _ method: String, _ params: JSON) -> [JSON] {
        let msg: JSON = ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params]
        return messages(send(msg.serialized() + "\n"))
    }
}
