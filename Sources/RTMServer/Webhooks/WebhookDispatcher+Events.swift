/// The hub's calls: which webhook events each session or channel change makes. The hub calls
/// them under its state lock, so one user's events are queued in the order they happened.
extension WebhookDispatcher {
    /// A new session (not a resumption within the grace window): if it replaced an older
    /// session of the same user (another client instance, C-6), that one ends first.
    func loggedIn(_ key: UserKey, ended previous: Set<String>?) {
        if let previous { sessionEnded(key, channels: previous, reason: "remoteLogin") }
        emit(.userOnline, user: key, reason: "login")
    }

    /// A session ended (`logout`, `connectionTimeout`, `remoteLogin`): it left every channel.
    func sessionEnded(_ key: UserKey, channels: Set<String>, reason: String) {
        for channel in channels.sorted() { channelChanged(.leaveChannel, key, channel: channel, reason: reason) }
        emit(.userOffline, user: key, reason: reason)
    }

    /// A message channel joined (subscribed) or left.
    func channelChanged(_ type: WebhookEvent.EventType, _ key: UserKey, channel: String, reason: String?) {
        emit(type, user: key, channel: channel, channelType: "message", reason: reason)
    }

    /// A stream channel joined or left (its STREAM connection, K-3).
    func streamChanged(_ type: WebhookEvent.EventType, _ membership: StreamMembership, reason: String?) {
        emit(type, user: UserKey(appId: membership.channel.appId, userId: membership.userId),
             channel: membership.channel.name, channelType: "stream", reason: reason)
    }

    /// `count` user messages to `key` were dropped undelivered (cap or age limit, M-1).
    func undeliverable(_ key: UserKey, count: Int) {
        emit(.userMessageUndeliverable, user: key, reason: "capOrAgeLimit", count: count)
    }
}
