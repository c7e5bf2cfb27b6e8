/// Presence event kinds carried in `presence` frames (`AgoraRtmPresenceEventType`, §2.10).
public enum PresenceEventKind: String, Sendable, CaseIterable {
    /// Members of the channel at subscribe time (`users`).
    case snapshot
    /// A user subscribed.
    case remoteJoin
    /// A user unsubscribed or logged out (intentional, SPEC P-4).
    case remoteLeave
    /// A user vanished and did not come back within the grace window (SPEC P-2).
    case remoteTimeout

    /// The reference's integer value.
    public var referenceValue: Int {
        switch self {
        case .snapshot: 1
        case .remoteJoin: 3
        case .remoteLeave: 4
        case .remoteTimeout: 5
        }
    }
}
