/// The webhook events of user messages (the hub's session and channel events and the stream
/// channels' go through a `WebhookOutbox`).
extension WebhookDispatcher {
    /// `count` user messages to `key` were dropped undelivered (cap or age limit, M-1).
    func undeliverable(_ key: UserKey, count: Int) {
        emit(.userMessageUndeliverable, user: key, reason: "capOrAgeLimit", count: count)
    }
}
