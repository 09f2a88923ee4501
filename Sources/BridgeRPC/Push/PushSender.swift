import BridgeCore

/// What a push service answered, as the queue acts on it.
enum PushOutcome: Equatable {
    /// 2xx: done; APNs' apns-id or the Web Push message URL.
    case delivered(id: String?)
    /// 429, 5xx, the connection lost: again after the backoff.
    case retry(String)
    /// The token or subscription is dead (410, BadDeviceToken, 404): the
    /// registration goes and the device is told when it next connects.
    case registrationGone(String)
    /// Refused for good (a payload the service rejects): dropped and logged.
    case rejected(String)
}

/// A push service client (APNs, Web Push), on the loop thread.
protocol PushSender: AnyObject {
    func send(_ r: PushRequest, to reg: PushRegistration, pushId: String, completion: @escaping (PushOutcome) -> Void)
}
