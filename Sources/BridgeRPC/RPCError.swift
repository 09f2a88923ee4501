import BridgeCore

/// A JSON-RPC error object. Application errors use -32000...-32099 and always
/// carry a `data` object saying what was wrong.
public struct RPCError: Error, Equatable, Sendable {
    public var code: Int
    public var message: String
    public var data: JSON?

    public init(code: Int, message: String, data: JSON? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public static let parseErrorCode = -32700
    public static let invalidRequestCode = -32600
    public static let methodNotFoundCode = -32601
    public static let invalidParamsCode = -32602
    public static let internalErrorCode = -32603
    public static let notInitializedCode = -32002
    /// A network client that has not authenticated as a paired device, a
    /// wrong pairing code or token, or a local-only method from the network.
    public static let unauthorizedCode = -32001

    public static func unauthorized(_ reason: String, method: String? = nil) -> RPCError {
        var data: [String: JSON] = ["reason": .string(reason)]
        if let method { data["method"] = .string(method) }
        return RPCError(code: unauthorizedCode, message: "Unauthorized", data: .object(data))
    }
    /// A paired device named another device's id (`deviceId` params).
    public static func otherDevice(_ named: String, _ paired: String) -> RPCError {
        invalidParams("invalid params: 'deviceId' names another device",
                      data: ["param": "deviceId", "got": .string(named), "expected": .string(paired),
                             "reason": "a paired device acts only as itself"])
    }

    public static let requestIdInUseCode = -32012
    /// An approval or question id another session already uses.
    public static func requestIdInUse(_ id: String, owner: String, by session: String) -> RPCError {
        application(requestIdInUseCode, "Request id in use",
                    data: ["requestId": .string(id), "sessionId": .string(session), "ownerSessionId": .string(owner),
                           "reason": "request ids must be unique across sessions; this one belongs to another session"])
    }

    public static func invalidParams(_ message: String, data: JSON? = nil) -> RPCError {
        RPCError(code: invalidParamsCode, message: message, data: data)
    }
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(code: methodNotFoundCode, message: "Method not found", data: ["method": .string(method)])
    }
    public static func internalError(_ message: String) -> RPCError {
        RPCError(code: internalErrorCode, message: "Internal error", data: ["detail": .string(message)])
    }
    /// An application error (-32000...-32099).
    public static func application(_ code: Int, _ message: String, data: JSON) -> RPCError {
        precondition((-32099 ... -32000).contains(code), "application errors live in -32099...-32000")
        return RPCError(code: code, message: message, data: data)
    }

    public var json: JSON {
        var o: [String: JSON] = ["code": .int(Int64(code)), "message": .string(message)]
        if let data { o["data"] = data }
        return .object(o)
    }
}
