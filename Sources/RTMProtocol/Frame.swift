import struct Foundation.Data

/// One protocol frame: a JSON object carried in one WebSocket text frame.
///
/// The frame is flat: `type` says which of the optional fields are meaningful (PROTOCOL.md lists
/// them per type). Readers ignore fields they do not know, so newer peers can add fields freely.
///
/// ```swift
/// let frame = Frame(type: .publish, id: 7, channel: "room", text: "hello")
/// let bytes = try FrameCodec.encode(frame, allocator: allocator)
/// ```
public struct Frame: Codable, Sendable, Equatable {
    /// What the frame is.
    public var type: FrameType
    /// Request correlation id, echoed in the `ok`/`error` reply. Chosen by the client, unique per connection.
    public var id: UInt64?

    // login
    /// Application id (login).
    public var appId: String?
    /// User id (login, sendUser target, message publisher, presence subject).
    public var userId: String?
    /// Token (login, renewToken).
    public var token: String?
    /// The client's ping interval in seconds (login), [5, 1800] in production.
    public var heartbeatInterval: Double?
    /// Grace after loss before the server declares the user gone, in seconds (login), [5, 300].
    public var presenceTimeout: Double?
    /// Opaque token from an earlier login's reply: resume that session (login).
    public var resumeToken: String?
    /// In a login reply: whether the earlier session was resumed (no presence change was seen by others).
    public var resumed: Bool?

    // channels and messages
    /// Channel name (subscribe, unsubscribe, publish, message, presence).
    public var channel: String?
    /// `"message"` for a message channel, `"user"` for a user message (message frames).
    public var channelType: String?
    /// Publisher user id (message frames).
    public var publisher: String?
    /// Text payload (UTF-8).
    public var text: String?
    /// Binary payload (base64 in JSON).
    public var data: Data?
    /// Application-defined message type, ≤ 32 characters.
    public var customType: String?
    /// Per-channel sequence number of a channel message, assigned by the server.
    public var seq: UInt64?
    /// In a sendUser reply: whether the receiver was online.
    public var receiverOnline: Bool?

    // presence
    /// Presence event kind: `snapshot`, `remoteJoin`, `remoteLeave`, `remoteTimeout`.
    public var event: String?
    /// Member list (presence snapshot).
    public var users: [String]?

    // errors, kicks, timing
    /// Numeric error or reason code (error: `RTMErrorCode`; kicked: link-state reason).
    public var code: Int?
    /// Human-readable reason.
    public var reason: String?
    /// Milliseconds since the Unix epoch (server time on server frames; echoed in pong).
    public var ts: Int64?
    /// Server-measured values for the client: the server's heartbeat deadline in seconds (login reply).
    public var serverTimeout: Double?

    // delivery guarantees (SPEC M-1, M-2, M-3)
    /// Message id. On `publish` / `sendUser`: the client's id for deduplication of resends (M-3).
    /// On a user `message`: the server's id, increasing per receiver, to acknowledge (M-1).
    public var msgId: UInt64?
    /// Epoch of a channel's sequence numbers; it changes when the server loses its replay buffer.
    public var epoch: String?
    /// Last seen position per channel, sent on login/subscribe for replay (M-2).
    public var positions: [String: ChannelPosition]?
    /// A count: messages lost in a `gap`, or dropped in a `dropped` notice.
    public var count: Int?
    /// In a sendUser reply: the message is stored until the receiver acknowledges it.
    public var stored: Bool?

    // presence (AGORA_REFERENCE §2.10)
    /// Temporary user state in a channel (setState items, getState reply, stateChanged event).
    public var state: [String: String]?
    /// Several users' states (`userId → state`): subscribe snapshot, whoNow, interval events.
    public var states: [String: [String: String]]?
    /// State keys to remove (removeState).
    public var keys: [String]?
    /// Subscribe option: receive presence events of the channel (default true).
    public var withPresence: Bool?
    /// Subscribe option: be invisible in the channel's presence (no join/leave, not listed).
    public var beQuiet: Bool?
    /// whoNow option: include each user's state.
    public var includeState: Bool?
    /// whoNow paging cursor: in a request, where to continue; in a reply, the next page (absent
    /// on the last page).
    public var page: String?
    /// Channel names (whereNow reply).
    public var channels: [String]?
    /// Users who left (interval event).
    public var left: [String]?
    /// Users who timed out (interval event).
    public var timedOut: [String]?

    // tokens (SPEC C-7)
    /// When the session's token stops granting login, ms since the Unix epoch (login and
    /// renewToken replies; absent: never).
    public var expiresAt: Int64?
    /// The capability token (a JWT, PROTOCOL.md §8.1) that limits what the session may do
    /// (`login`, `join`; `renewToken` to replace it).
    public var capability: String?

    // stream channels and topics (AGORA_REFERENCE §2.9)
    /// Topic name (joinTopic, leaveTopic, publishTopic, subscribeTopic, topic messages).
    public var topic: String?
    /// joinTopic: 0 unordered (default), 1 ordered.
    public var qos: Int?
    /// joinTopic: 0 highest, 1 high, 4 normal (default), 8 low.
    public var priority: Int?
    /// joinTopic: the publisher's metadata, ≤ 256 bytes.
    public var meta: String?
    /// Topics with their publishers (join reply, topic events).
    public var topics: [TopicInfo]?
    /// subscribeTopic reply: users that could not be subscribed.
    public var failed: [String]?

    // storage (§2.11)
    /// `"channel"` or `"user"` (metadata requests and storage events).
    public var storageType: String?
    /// A metadata set (write requests, get replies, storage events).
    public var metadata: Metadata?
    /// Write option: record the write time in each written item.
    public var recordTs: Bool?
    /// Write option: record the writer in each written item.
    public var recordUserId: Bool?
    /// Channel-metadata write: tell every subscriber of the channel (the classic API's
    /// `enableNotificationToChannelMembers`), not only those subscribed `withMetadata`.
    public var notifyAll: Bool?
    /// Subscribe/join option: receive the channel's storage events (default false).
    public var withMetadata: Bool?
    /// Subscribe/join option: receive the channel's lock events (default false).
    public var withLock: Bool?

    // locks (§2.12)
    /// Lock name (lock requests; a channel-metadata write guarded by a lock).
    public var lockName: String?
    /// setLock: seconds a held lock survives its owner being offline, [10, 300] (default 10).
    public var ttl: Int?
    /// acquireLock: wait until the lock is free instead of failing.
    public var retry: Bool?
    /// acquireLock reply: the acquisition's fencing token.
    public var fencingToken: UInt64?
    /// Locks of a channel (getLocks reply, lock events).
    public var locks: [LockDetail]?

    // history (§2.8)
    /// publish / sendUser: also store the message in the channel's history.
    public var storeInHistory: Bool?
    /// getMessages: only messages older than this (ms, exclusive); 0 or absent = now.
    public var start: Int64?
    /// getMessages: only messages at or after this (ms, inclusive); 0 or absent = no bound.
    public var end: Int64?
    /// getMessages reply: newest first.
    public var messages: [HistoryMessage]?
    /// getMessages reply: pass as the next `start`; 0 = nothing older remains.
    public var newStart: Int64?
    /// login: deliver user messages to this connection in the binary form (`0x84`, PROTOCOL.md
    /// §2.3) instead of JSON `message` frames.
    public var binaryUser: Bool?
    /// goaway: milliseconds over which the client should spread its reconnection (it waits a
    /// random delay in [0, reconnectDelay] before reconnecting; PROTOCOL.md §3.4).
    public var reconnectDelay: Int64?

    // peer online status and call invitations (AGORA_REFERENCE §1.5, §1.7, §1.8)
    /// Peers and their online states (queryPeersOnlineStatus / subscribe replies, peersOnlineStatus events).
    public var peers: [PeerOnlineStatus]?
    /// A call invitation's id, chosen by the caller's SDK (invitation requests and events).
    public var invitationId: String?
    /// getChannelMemberCount reply: channel → visible members.
    public var memberCounts: [String: Int]?

    /// Creates a frame; only `type` is required.
    public init(
        type: FrameType, id: UInt64? = nil, appId: String? = nil, userId: String? = nil,
        token: String? = nil, heartbeatInterval: Double? = nil, presenceTimeout: Double? = nil,
        resumeToken: String? = nil, resumed: Bool? = nil, channel: String? = nil,
        channelType: String? = nil, publisher: String? = nil, text: String? = nil,
        data: Data? = nil, customType: String? = nil, seq: UInt64? = nil,
        receiverOnline: Bool? = nil, event: String? = nil, users: [String]? = nil,
        code: Int? = nil, reason: String? = nil, ts: Int64? = nil, serverTimeout: Double? = nil,
        msgId: UInt64? = nil, epoch: String? = nil, positions: [String: ChannelPosition]? = nil,
        count: Int? = nil, stored: Bool? = nil, state: [String: String]? = nil,
        states: [String: [String: String]]? = nil, keys: [String]? = nil, withPresence: Bool? = nil,
        beQuiet: Bool? = nil, includeState: Bool? = nil, page: String? = nil, channels: [String]? = nil,
        left: [String]? = nil, timedOut: [String]? = nil
    ) {
        self.type = type; self.id = id; self.appId = appId; self.userId = userId
        self.token = token; self.heartbeatInterval = heartbeatInterval
        self.presenceTimeout = presenceTimeout; self.resumeToken = resumeToken
        self.resumed = resumed; self.channel = channel; self.channelType = channelType
        self.publisher = publisher; self.text = text; self.data = data
        self.customType = customType; self.seq = seq; self.receiverOnline = receiverOnline
        self.event = event; self.users = users; self.code = code; self.reason = reason
        self.ts = ts; self.serverTimeout = serverTimeout
        self.msgId = msgId; self.epoch = epoch; self.positions = positions
        self.count = count; self.stored = stored
        self.state = state; self.states = states; self.keys = keys; self.withPresence = withPresence
        self.beQuiet = beQuiet; self.includeState = includeState; self.page = page
        self.channels = channels; self.left = left; self.timedOut = timedOut
    }

    private enum CodingKeys: String, CodingKey {
        case type, id, appId, userId, token, heartbeatInterval, presenceTimeout, resumeToken, resumed
        case channel, channelType, publisher, text, data, customType, seq, receiverOnline
        case event, users, code, reason, ts, serverTimeout
        case msgId, epoch, positions, count, stored
        case state, states, keys, withPresence, beQuiet, includeState, page, channels, left, timedOut
        case expiresAt, capability, topic, qos, priority, meta, topics, failed
        case storageType, metadata, recordTs, recordUserId, withMetadata, withLock, notifyAll
        case lockName, ttl, retry, fencingToken, locks
        case peers, invitationId, memberCounts
        case storeInHistory, start, end, messages, newStart, binaryUser, reconnectDelay
    }

    /// Decodes a frame; unknown fields are ignored, a wrong type or value names the field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decode(FrameType.self, forKey: .type)
        id = try Self.unsigned(c, .id)
        appId = try c.field(String.self, .appId)
        userId = try c.field(String.self, .userId)
        token = try c.field(String.self, .token)
        heartbeatInterval = try c.field(Double.self, .heartbeatInterval)
        presenceTimeout = try c.field(Double.self, .presenceTimeout)
        resumeToken = try c.field(String.self, .resumeToken)
        resumed = try c.field(Bool.self, .resumed)
        channel = try c.field(String.self, .channel)
        channelType = try c.field(String.self, .channelType)
        publisher = try c.field(String.self, .publisher)
        text = try c.field(String.self, .text)
        data = try c.field(Data.self, .data)
        customType = try c.field(String.self, .customType)
        seq = try Self.unsigned(c, .seq)
        receiverOnline = try c.field(Bool.self, .receiverOnline)
        event = try c.field(String.self, .event)
        users = try c.field([String].self, .users)
        code = try c.field(Int.self, .code)
        reason = try c.field(String.self, .reason)
        ts = try c.field(Int64.self, .ts)
        serverTimeout = try c.field(Double.self, .serverTimeout)
        msgId = try Self.unsigned(c, .msgId)
        epoch = try c.field(String.self, .epoch)
        positions = try c.field([String: ChannelPosition].self, .positions)
        count = try c.field(Int.self, .count)
        stored = try c.field(Bool.self, .stored)
        state = try c.field([String: String].self, .state)
        states = try c.field([String: [String: String]].self, .states)
        keys = try c.field([String].self, .keys)
        withPresence = try c.field(Bool.self, .withPresence)
        beQuiet = try c.field(Bool.self, .beQuiet)
        includeState = try c.field(Bool.self, .includeState)
        page = try c.field(String.self, .page)
        channels = try c.field([String].self, .channels)
        left = try c.field([String].self, .left)
        timedOut = try c.field([String].self, .timedOut)
        expiresAt = try c.field(Int64.self, .expiresAt)
        capability = try c.field(String.self, .capability)
        topic = try c.field(String.self, .topic)
        qos = try c.field(Int.self, .qos)
        priority = try c.field(Int.self, .priority)
        meta = try c.field(String.self, .meta)
        topics = try c.field([TopicInfo].self, .topics)
        failed = try c.field([String].self, .failed)
        storageType = try c.field(String.self, .storageType)
        metadata = try c.field(Metadata.self, .metadata)
        recordTs = try c.field(Bool.self, .recordTs)
        recordUserId = try c.field(Bool.self, .recordUserId)
        withMetadata = try c.field(Bool.self, .withMetadata)
        notifyAll = try c.field(Bool.self, .notifyAll)
        withLock = try c.field(Bool.self, .withLock)
        lockName = try c.field(String.self, .lockName)
        ttl = try c.field(Int.self, .ttl)
        retry = try c.field(Bool.self, .retry)
        fencingToken = try Self.unsigned(c, .fencingToken)
        locks = try c.field([LockDetail].self, .locks)
        storeInHistory = try c.field(Bool.self, .storeInHistory)
        start = try c.field(Int64.self, .start)
        end = try c.field(Int64.self, .end)
        messages = try c.field([HistoryMessage].self, .messages)
        newStart = try c.field(Int64.self, .newStart)
        binaryUser = try c.field(Bool.self, .binaryUser)
        peers = try c.field([PeerOnlineStatus].self, .peers)
        invitationId = try c.field(String.self, .invitationId)
        memberCounts = try c.field([String: Int].self, .memberCounts)
        reconnectDelay = try c.field(Int64.self, .reconnectDelay)
    }

    /// A copy changed by `body`: sets fields the initializer does not take.
    ///
    /// ```swift
    /// let frame = Frame(type: .joinTopic, channel: "game").with { $0.topic = "moves"; $0.qos = 1 }
    /// ```
    public func with(_ body: (inout Frame) -> Void) -> Frame {
        var copy = self
        body(&copy)
        return copy
    }

    /// Reads a non-negative integer of at most 2⁶³ − 1 (PROTOCOL.md §2): a negative value, a
    /// fraction or a larger number is reported as a bad value of that field.
    private static func unsigned(_ c: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> UInt64? {
        try c.integer(Int64.self, key, in: 0...Int64.max).map(UInt64.init)
    }

    /// An error reply to request `id` (or a connection-level error when `id` is nil).
    public static func error(id: UInt64?, _ code: RTMErrorCode, _ reason: String) -> Frame {
        Frame(type: .error, id: id, code: code.rawValue, reason: reason)
    }

    /// The payload size in bytes (text as UTF-8, or binary), for limit checks.
    public var payloadSize: Int { (text?.utf8.count ?? 0) + (data?.count ?? 0) }
}

/// Where a subscriber is in a channel: the epoch of the channel's sequence numbers and the last
/// sequence number seen in it (SPEC M-2).
public struct ChannelPosition: Codable, Sendable, Hashable {
    /// The channel's epoch when `seq` was seen.
    public var epoch: String
    /// The last sequence number seen.
    public var seq: UInt64
    /// Creates a position.
    public init(epoch: String, seq: UInt64) {
        self.epoch = epoch
        self.seq = seq
    }

    /// Decodes a position; a bad `seq` names its field (`positions.room.seq`).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        epoch = try c.required(String.self, .epoch)
        seq = try c.required(UInt64.self, .seq)
    }
}
