/// The webhook events of stream channels and user messages (the hub's session and channel
/// events go through its `WebhookOutbox`).
extension WebhookDispatcher {
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
