/// Presence event kinds carried in `presence` frames (`AgoraRtmPresenceEventType`, §2.10).
public enum PresenceEventKind: String, Sendable, CaseIterable {
    /// Members of the channel (and their states) at subscribe time.
    case snapshot
    /// Interval mode (many members): the changes of the last interval, aggregated
    /// (`users` joined, `left`, `timedOut`, `states` changed).
    case interval
    /// A user subscribed.
    case remoteJoin
    /// A user unsubscribed or logged out (intentional, SPEC P-4).
    case remoteLeave
    /// A user vanished and did not come back within the grace window (SPEC P-2).
    case remoteTimeout
    /// A user's temporary state changed (`state` is the whole new state).
    case remoteStateChanged

    /// The reference's integer value.
    public var referenceValue: Int {
        switch self {
        case .snapshot: 1
        case .interval: 2
        case .remoteJoin: 3
        case .remoteLeave: 4
        case .remoteTimeout: 5
        case .remoteStateChanged: 6
        }
    }
}
