import Foundation

/// One event the server POSTs to the webhook URL, as a JSON object (docs/operations.md, "Webhooks").
///
/// Names follow the reference's style (camelCase, its presence vocabulary: `remoteJoinChannel`
/// / `remoteLeaveChannel` become `joinChannel` / `leaveChannel`, `remoteConnectionTimeout`
/// becomes the reason `connectionTimeout`). `eventId` is unique per event and stays the same
/// when the event is sent again: receivers dedupe by it (delivery is at least once).
public struct WebhookEvent: Codable, Sendable, Equatable {
    /// What happened.
    public enum EventType: String, Codable, Sendable {
        /// A user logged in (a new session; a reconnection within the grace window is not one).
        case userOnline
        /// A user's session ended: `reason` is `logout`, `connectionTimeout` (lost and not back
        /// within the grace window, SPEC P-2), `remoteLogin` (the same user id logged in
        /// elsewhere, C-6), `kicked` (an administrator kicked or banned the user, or revoked
        /// its token), `serverShutdown` (the server stopped with the session open) or
        /// `serverRestart` (an earlier run of the server ended without stopping, killed or
        /// its machine down; sent when the next run starts).
        case userOffline
        /// A user subscribed to a message channel (`channelType` "message") or joined a stream
        /// channel ("stream").
        case joinChannel
        /// A user left a channel: `reason` is `leave`, `logout` or `connectionTimeout`.
        case leaveChannel
        /// User messages to `userId` were dropped before delivery (the per-receiver cap or the
        /// age limit, SPEC M-1): `count` of them, `reason` `capOrAgeLimit`.
        case userMessageUndeliverable
    }

    /// Unique id of this event: `<server run>-<sequence>`.
    public var eventId: String
    /// What happened.
    public var eventType: EventType
    /// Application.
    public var appId: String
    /// The user concerned (the ordering key: one user's events arrive in order).
    public var userId: String
    /// Server time of the event, ms since the Unix epoch.
    public var ts: Int64
    /// Channel, for `joinChannel` / `leaveChannel`.
    public var channelName: String?
    /// `message` or `stream`, for `joinChannel` / `leaveChannel`.
    public var channelType: String?
    /// Why, where the type has several causes (see `EventType`).
    public var reason: String?
    /// How many messages, for `userMessageUndeliverable`.
    public var count: Int?

    /// Creates an event.
    public init(eventId: String, eventType: EventType, appId: String, userId: String, ts: Int64,
                channelName: String? = nil, channelType: String? = nil, reason: String? = nil, count: Int? = nil) {
        self.eventId = eventId; self.eventType = eventType; self.appId = appId; self.userId = userId; self.ts = ts
        self.channelName = channelName; self.channelType = channelType; self.reason = reason; self.count = count
    }

    /// The events that end a session: `leaveChannel` for each channel (name and type, in the
    /// order given), then `userOffline`, all with `reason`.
    static func sessionEnd(_ user: UserKey, channels: [(name: String, type: String)], reason: String, ts: Int64) -> [WebhookEvent] {
        channels.map {
            WebhookEvent(eventId: "", eventType: .leaveChannel, appId: user.appId, userId: user.userId, ts: ts,
                         channelName: $0.name, channelType: $0.type, reason: reason)
        } + [WebhookEvent(eventId: "", eventType: .userOffline, appId: user.appId, userId: user.userId, ts: ts, reason: reason)]
    }

    /// The ordering key: events with the same key are delivered one at a time, in order.
    var orderingKey: String { "\(appId)/\(userId)" }
}
