/// Storage event kinds carried in `storage` frames (`AgoraRtmStorageEventType`, §2.11).
public enum StorageEventKind: String, Sendable, CaseIterable, Codable {
    /// The whole set, on subscribe (with metadata) or subscribeMetadata.
    case snapshot
    /// Items were set (created or overwritten).
    case set
    /// Existing items were updated.
    case update
    /// Items were removed.
    case remove

    /// The reference's integer value.
    public var referenceValue: Int {
        switch self {
        case .snapshot: 1
        case .set: 2
        case .update: 3
        case .remove: 4
        }
    }
}

/// Storage target kinds (`AgoraRtmStorageType`).
public enum StorageType: String, Sendable, CaseIterable, Codable {
    /// A user's metadata.
    case user
    /// A channel's metadata.
    case channel
}

/// Lock event kinds carried in `lock` frames (`AgoraRtmLockEventType`, §2.12).
public enum LockEventKind: String, Sendable, CaseIterable, Codable {
    /// All locks of the channel, on subscribe (with locks).
    case snapshot
    /// A lock was defined.
    case lockSet
    /// A lock was deleted.
    case lockRemoved
    /// A lock was taken (`locks[0].owner`, `fencingToken`).
    case lockAcquired
    /// A lock was given back, revoked, or its owner stayed offline past the TTL.
    case lockReleased
    /// After a reconnection: a lock this client held was released meanwhile.
    case lockExpired

    /// The reference's integer value.
    public var referenceValue: Int {
        switch self {
        case .snapshot: 1
        case .lockSet: 2
        case .lockRemoved: 3
        case .lockAcquired: 4
        case .lockReleased: 5
        case .lockExpired: 6
        }
    }
}

/// Topic event kinds carried in `topic` frames (`AgoraRtmTopicEventType`, §2.9).
public enum TopicEventKind: String, Sendable, CaseIterable, Codable {
    /// Every topic and its publishers, on join.
    case snapshot
    /// A remote user joined a topic as a publisher.
    case remoteJoinTopic
    /// A remote user left a topic.
    case remoteLeaveTopic

    /// The reference's integer value.
    public var referenceValue: Int {
        switch self {
        case .snapshot: 1
        case .remoteJoinTopic: 2
        case .remoteLeaveTopic: 3
        }
    }
}
