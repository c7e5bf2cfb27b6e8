import RTMProtocol

/// A storage event (`AgoraRtmStorageEvent`, AGORA_REFERENCE §2.11): the whole set after a change.
public struct StorageEvent: Sendable, Equatable {
    /// snapshot (on subscribe), set, update or remove.
    public let kind: StorageEventKind
    /// A channel's or a user's metadata.
    public let storageType: StorageType
    /// The channel name or user id.
    public let target: String
    /// The whole set after the change.
    public let metadata: Metadata
    /// Server time, ms since the Unix epoch.
    public let timestamp: Int64
}

/// A lock event (`AgoraRtmLockEvent`, §2.12).
public struct LockEvent: Sendable, Equatable {
    /// snapshot, lockSet, lockRemoved, lockAcquired, lockReleased or lockExpired.
    public let kind: LockEventKind
    /// The channel.
    public let channelName: String
    /// The locks concerned (all of them in a snapshot).
    public let locks: [LockDetail]
    /// Server time (client time for lockExpired), ms since the Unix epoch.
    public let timestamp: Int64
}

/// A topic event of a stream channel (`AgoraRtmTopicEvent`, §2.9).
public struct TopicEvent: Sendable, Equatable {
    /// snapshot (on join), remoteJoinTopic or remoteLeaveTopic.
    public let kind: TopicEventKind
    /// The stream channel.
    public let channelName: String
    /// The user who joined or left (empty in a snapshot).
    public let userId: String
    /// The topics with their publishers.
    public let topics: [TopicInfo]
    /// Server time, ms since the Unix epoch.
    public let timestamp: Int64
}

/// A page of a channel's history (§2.8).
public struct HistoryPage: Sendable, Equatable {
    /// The messages, newest first.
    public let messages: [HistoryMessage]
    /// Pass as `start` for the next (older) page; 0 when nothing older is left.
    public let newStart: Int64
}

/// Options of a metadata write (`AgoraRtmMetadataOptions`).
public struct MetadataOptions: Sendable, Equatable {
    /// Record the write time in each written item.
    public var recordTs: Bool
    /// Record the writer's user id in each written item.
    public var recordUserId: Bool

    /// Options; nothing recorded by default.
    public init(recordTs: Bool = false, recordUserId: Bool = false) {
        self.recordTs = recordTs
        self.recordUserId = recordUserId
    }
}
