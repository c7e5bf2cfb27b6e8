/// The webhook events of the hub's session and channel changes (or the stream channels'), in
/// the order they happened. A plain value inside `HubState` (`StreamState`): events are added
/// under its owner's lock (so one user's events keep their order whichever thread made them)
/// and taken, in order, by the dispatcher's own queue (`WebhookDispatcher.addSource`); nothing
/// is posted or written under the lock.
struct WebhookOutbox {
    /// False when no webhook URL is configured: nothing is kept.
    var isEnabled = false
    private(set) var events: [WebhookEvent] = []

    /// A new session (not a resumption within the grace window): if it replaced an older
    /// session of the same user (another client instance, C-6), that one ends first.
    mutating func loggedIn(_ key: UserKey, ended previous: Set<String>?, ts: Int64) {
        guard isEnabled else { return }
        if let previous { sessionEnded(key, channels: previous, reason: "remoteLogin", ts: ts) }
        add(.userOnline, key, reason: "login", ts: ts)
    }

    /// A session ended (`logout`, `connectionTimeout`, `remoteLogin`): it left every channel.
    mutating func sessionEnded(_ key: UserKey, channels: Set<String>, reason: String, ts: Int64) {
        guard isEnabled else { return }
        events += WebhookEvent.sessionEnd(key, channels: channels.sorted().map { ($0, "message") }, reason: reason, ts: ts)
    }

    /// A message channel joined (subscribed) or left.
    mutating func channelChanged(_ type: WebhookEvent.EventType, _ key: UserKey, channel: String, reason: String?, ts: Int64) {
        guard isEnabled else { return }
        add(type, key, channel: channel, channelType: "message", reason: reason, ts: ts)
    }

    /// A stream channel joined or left (its STREAM connection, K-3).
    mutating func streamChanged(_ type: WebhookEvent.EventType, _ membership: StreamMembership, reason: String?, ts: Int64) {
        guard isEnabled else { return }
        add(type, UserKey(appId: membership.channel.appId, userId: membership.userId), channel: membership.channel.name,
            channelType: "stream", reason: reason, ts: ts)
    }

    /// The events so far, oldest first; the outbox is left empty.
    mutating func take() -> [WebhookEvent] {
        defer { events = [] }
        return events
    }

    private mutating func add(_ type: WebhookEvent.EventType, _ key: UserKey, channel: String? = nil, channelType: String? = nil,
                              reason: String?, ts: Int64) {
        events.append(WebhookEvent(eventId: "", eventType: type, appId: key.appId, userId: key.userId, ts: ts,
                                   channelName: channel, channelType: channelType, reason: reason))
    }
}
