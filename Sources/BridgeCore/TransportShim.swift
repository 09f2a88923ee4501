// TEMPORARY until the c-runtime branch lands.
public enum _ShimLimits { nonisolated(unsafe) public static var notify = 256 << 10 }
extension RPCConnection {
    public func sendNotification(serialized bytes: [UInt8]) -> Bool {
        if queuedBytes > _ShimLimits.notify { countDroppedNotification(); return false }
        return send(serialized: bytes)
    }
}
extension RPCEndpoint {
    public func close(then: @escaping () -> Void) {
        var open = allConnections.count
        if open == 0 { return then() }
        for c in allConnections { c.close { open -= 1; if open == 0 { then() } } }
    }
}
extension RPCEndpoint {
    public var notifyLimitBytes: Int { get { _ShimLimits.notify } set { _ShimLimits.notify = newValue } }
}
