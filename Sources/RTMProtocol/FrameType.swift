/// The `type` of a wire frame. An open set: a type this version does not know decodes to a
/// value that is not one of the constants below, and is answered with an error, never a crash.
public struct FrameType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The string on the wire.
    public let rawValue: String
    /// Wraps a wire string.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The wire string.
    public var description: String { rawValue }

    /// Decodes from a bare JSON string.
    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }
    /// Encodes as a bare JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    // MARK: client → server
    /// Opens the session (must be the first frame).
    public static let login = FrameType(rawValue: "login")
    /// Liveness probe; the server answers `pong` with the same `ts`.
    public static let ping = FrameType(rawValue: "ping")
    /// Subscribe to a message channel.
    public static let subscribe = FrameType(rawValue: "subscribe")
    /// Unsubscribe from a message channel (an intentional leave, SPEC P-4).
    public static let unsubscribe = FrameType(rawValue: "unsubscribe")
    /// Publish to a message channel.
    public static let publish = FrameType(rawValue: "publish")
    /// Send a user (peer-to-peer) message.
    public static let sendUser = FrameType(rawValue: "sendUser")
    /// Replace the session's token in-band (SPEC T-7).
    public static let renewToken = FrameType(rawValue: "renewToken")
    /// Set (merge) this user's temporary state in a channel (`channel`, `state`).
    public static let setState = FrameType(rawValue: "setState")
    /// Remove keys of this user's temporary state in a channel (`channel`, `keys`).
    public static let removeState = FrameType(rawValue: "removeState")
    /// A user's temporary state in a channel (`channel`, `userId`).
    public static let getState = FrameType(rawValue: "getState")
    /// Who is in a channel (`channel`, `includeState`, `page`): 100 users per page.
    public static let whoNow = FrameType(rawValue: "whoNow")
    /// Which channels a user is in (`userId`).
    public static let whereNow = FrameType(rawValue: "whereNow")
    /// Acknowledge user messages up to `msgId` (cumulative): the server forgets them (SPEC M-1).
    public static let ackUser = FrameType(rawValue: "ackUser")
    /// End the session on purpose (SPEC H-4, P-4).
    public static let logout = FrameType(rawValue: "logout")

    /// Which messages a channel stored (`channel`, `channelType`, `count` ≤ 100, `start`, `end`).
    public static let getMessages = FrameType(rawValue: "getMessages")

    // storage (AGORA_REFERENCE §2.11): `storageType` channel (`channel`) or user (`userId`)
    /// Create or overwrite items (compare-and-set by revision).
    public static let setMetadata = FrameType(rawValue: "setMetadata")
    /// Replace the whole set with the given items (the classic API's set*Attributes).
    public static let replaceMetadata = FrameType(rawValue: "replaceMetadata")
    /// Change existing items only.
    public static let updateMetadata = FrameType(rawValue: "updateMetadata")
    /// Remove items (no items: all of them).
    public static let removeMetadata = FrameType(rawValue: "removeMetadata")
    /// Read a metadata set.
    public static let getMetadata = FrameType(rawValue: "getMetadata")
    /// Receive storage events of a user's metadata (`userId`).
    public static let subscribeMetadata = FrameType(rawValue: "subscribeMetadata")
    /// Stop receiving them.
    public static let unsubscribeMetadata = FrameType(rawValue: "unsubscribeMetadata")

    // locks (§2.12), all with `channel` and `lockName`
    /// Define a lock (`ttl`).
    public static let setLock = FrameType(rawValue: "setLock")
    /// Take a lock (`retry`: wait for it); the reply carries the `fencingToken`.
    public static let acquireLock = FrameType(rawValue: "acquireLock")
    /// Give a held lock back.
    public static let releaseLock = FrameType(rawValue: "releaseLock")
    /// Take a lock away from its holder (`userId`).
    public static let revokeLock = FrameType(rawValue: "revokeLock")
    /// Delete a lock.
    public static let removeLock = FrameType(rawValue: "removeLock")
    /// The channel's locks.
    public static let getLocks = FrameType(rawValue: "getLocks")

    // stream connections (§2.9): a STREAM connection starts with `join` instead of `login`
    /// Open a stream-channel session on this connection (`appId`, `userId`, `token`, `channel`,
    /// `withPresence`, `beQuiet`).
    public static let join = FrameType(rawValue: "join")
    /// Leave the stream channel; the server closes the connection.
    public static let leave = FrameType(rawValue: "leave")
    /// Become a publisher of a topic (`topic`, `qos`, `priority`, `meta`).
    public static let joinTopic = FrameType(rawValue: "joinTopic")
    /// Stop publishing to a topic.
    public static let leaveTopic = FrameType(rawValue: "leaveTopic")
    /// Publish to a joined topic (`topic`, `text` or `data`, `customType`); ≤ 1 KB.
    public static let publishTopic = FrameType(rawValue: "publishTopic")
    /// Receive a topic's messages from some publishers (`topic`, `users`; none: any, up to 64).
    public static let subscribeTopic = FrameType(rawValue: "subscribeTopic")
    /// Stop receiving a topic (from `users`, or from all).
    public static let unsubscribeTopic = FrameType(rawValue: "unsubscribeTopic")

    // MARK: server → client
    /// Successful reply to the request with the same `id`.
    public static let ok = FrameType(rawValue: "ok")
    /// Failed reply (with `id`) or a protocol error (without).
    public static let error = FrameType(rawValue: "error")
    /// Answer to `ping`.
    public static let pong = FrameType(rawValue: "pong")
    /// A channel or user message.
    public static let message = FrameType(rawValue: "message")
    /// A presence event in a channel.
    public static let presence = FrameType(rawValue: "presence")
    /// Messages of a channel were missed and could not be replayed (`channel`, `count`; no
    /// `count` = unknown, e.g. the server restarted) (SPEC M-2).
    public static let gap = FrameType(rawValue: "gap")
    /// User messages waiting for this user were dropped (cap or age) before delivery (`count`) (M-1).
    public static let dropped = FrameType(rawValue: "dropped")
    /// The session was ended by the server (another login, token expiry, ban); do not reconnect.
    public static let kicked = FrameType(rawValue: "kicked")
    /// A storage event (`storageType`, `event`: snapshot/set/update/remove, `channel` or
    /// `userId`, the whole `metadata`).
    public static let storage = FrameType(rawValue: "storage")
    /// A lock event (`channel`, `event`: snapshot/set/removed/acquired/released/expired, `locks`).
    public static let lock = FrameType(rawValue: "lock")
    /// A topic event on a stream connection (`event`: snapshot/remoteJoinTopic/remoteLeaveTopic,
    /// `userId`, `topics`).
    public static let topicEvent = FrameType(rawValue: "topic")
    /// The server ended a subscription (`channel`, `code`, `reason`): a renewed capability
    /// token no longer grants it. The client forgets the channel (it does not resubscribe).
    public static let unsubscribed = FrameType(rawValue: "unsubscribed")
    /// The server ended a watch the session's grants no longer allow, short of a whole
    /// subscription (`event`: `presence`, `metadata` or `lock` for that part of the subscription
    /// to `channel`, or of the stream channel with `channelType` `stream`; `userMetadata` or
    /// `peerStatus` for the watch of `userId`; `topic` for the stream channel's joined `topic`),
    /// with `code` -10104 and the `reason`. The client forgets the watch (it does not renew it
    /// after a reconnection).
    public static let watchEnded = FrameType(rawValue: "watchEnded")
    /// The server is going away (shutdown); reconnect with backoff.
    public static let goAway = FrameType(rawValue: "goaway")
}
