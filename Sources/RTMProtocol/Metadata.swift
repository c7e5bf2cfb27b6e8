import struct Foundation.Data

/// A set of metadata items of one channel or one user (`AgoraRtmMetadata`, AGORA_REFERENCE §2.11).
///
/// Revisions make compare-and-set writes possible: a write that names a revision is applied
/// only if it still matches (else `storageOutdatedRevision`); -1 means "no check".
public struct Metadata: Codable, Sendable, Equatable {
    /// The set's revision: it increases with every write to the set. In a write request: the
    /// revision the writer read (-1: no check).
    public var majorRevision: Int64
    /// The items, sorted by key in replies and events.
    public var items: [MetadataItem]

    /// A set with the given items; `majorRevision` -1 (no check) by default.
    public init(majorRevision: Int64 = -1, items: [MetadataItem] = []) {
        self.majorRevision = majorRevision
        self.items = items
    }

    /// The item with `key`, if present.
    public subscript(key: String) -> MetadataItem? { items.first { $0.key == key } }

    /// Decodes a set; a bad revision names its field (`metadata.items[0].revision`).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        majorRevision = try c.required(Int64.self, .majorRevision)
        items = try c.required([MetadataItem].self, .items)
    }
}

/// One key/value item of a metadata set (`AgoraRtmMetadataItem`).
public struct MetadataItem: Codable, Sendable, Equatable {
    /// Key, 1–32 characters.
    public var key: String
    /// Value, ≤ 16 KB (UTF-8).
    public var value: String
    /// The item's revision: the set's `majorRevision` when the item was last written. In a write
    /// request: the revision the writer read (-1: no check; 0: the item must not exist yet).
    public var revision: Int64
    /// Who wrote it last (present when the write asked `recordUserId`).
    public var authorUserId: String?
    /// When it was written, ms since the Unix epoch (present when the write asked `recordTs`).
    public var updateTs: Int64?

    /// An item; `revision` -1 (no check) by default.
    public init(key: String, value: String = "", revision: Int64 = -1, authorUserId: String? = nil, updateTs: Int64? = nil) {
        self.key = key
        self.value = value
        self.revision = revision
        self.authorUserId = authorUserId
        self.updateTs = updateTs
    }

    /// Decodes an item; a bad revision or time names its field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        key = try c.required(String.self, .key)
        value = try c.required(String.self, .value)
        revision = try c.required(Int64.self, .revision)
        authorUserId = try c.field(String.self, .authorUserId)
        updateTs = try c.field(Int64.self, .updateTs)
    }
}

/// One lock of a channel (`AgoraRtmLockDetail`, AGORA_REFERENCE §2.12), with the fencing token
/// of its current acquisition.
public struct LockDetail: Codable, Sendable, Equatable {
    /// Lock name, ≤ 64 characters.
    public var lockName: String
    /// The holder's user id; empty when free.
    public var owner: String
    /// Seconds the lock stays held after its owner is declared offline, [10, 300].
    public var ttl: Int
    /// Increases with every acquisition of any lock on the server: a holder can hand it to the
    /// resource it protects, which refuses writes carrying a smaller token than one it has seen.
    /// 0 when free.
    public var fencingToken: UInt64

    /// A lock detail.
    public init(lockName: String, owner: String = "", ttl: Int, fencingToken: UInt64 = 0) {
        self.lockName = lockName
        self.owner = owner
        self.ttl = ttl
        self.fencingToken = fencingToken
    }
}

/// A topic of a stream channel with its publishers (`AgoraRtmTopicInfo`, §2.9).
public struct TopicInfo: Codable, Sendable, Equatable {
    /// Topic name.
    public var topic: String
    /// Users who joined the topic (as publishers).
    public var publishers: [TopicPublisher]

    /// A topic.
    public init(topic: String, publishers: [TopicPublisher]) {
        self.topic = topic
        self.publishers = publishers
    }
}

/// A publisher of a topic (`AgoraRtmPublisherInfo`).
public struct TopicPublisher: Codable, Sendable, Equatable {
    /// The publisher's user id.
    public var userId: String
    /// The metadata it gave when joining the topic (≤ 256 bytes).
    public var meta: String

    /// A publisher.
    public init(userId: String, meta: String = "") {
        self.userId = userId
        self.meta = meta
    }
}

/// A stored message returned by a history query (`AgoraRtmHistoryMessage`, §2.8).
public struct HistoryMessage: Codable, Sendable, Equatable {
    /// Who published it.
    public var publisher: String
    /// Text payload.
    public var text: String?
    /// Binary payload (base64 in JSON).
    public var data: Data?
    /// Application-defined type.
    public var customType: String?
    /// Server time when it was stored, ms since the Unix epoch; unique within a channel's
    /// history, so it is also the paging cursor.
    public var ts: Int64

    /// A stored message.
    public init(publisher: String, text: String? = nil, data: Data? = nil, customType: String? = nil, ts: Int64) {
        self.publisher = publisher
        self.text = text
        self.data = data
        self.customType = customType
        self.ts = ts
    }
}
