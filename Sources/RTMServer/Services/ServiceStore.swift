import Foundation
import RTMProtocol

/// What a metadata set belongs to: a channel's or a user's (per application).
public struct StorageKey: Hashable, Sendable {
    public let appId: String
    public let type: StorageType
    /// Channel name or user id.
    public let target: String

    /// A channel's (`type` channel, `target` its name) or a user's set.
    public init(appId: String, type: StorageType, target: String) {
        self.appId = appId
        self.type = type
        self.target = target
    }
}

/// A message kept in a channel's history (`storeInHistory`, AGORA_REFERENCE §2.8).
public struct HistoryRecord: Sendable, Equatable {
    public let appId: String
    /// `"message"` or `"user"`.
    public let channelType: String
    /// Message channel name; for user messages, the two user ids joined (see `HistoryRecord.userPair`).
    public let channel: String
    public let message: HistoryMessage
    /// Identifies the message across resends (channel epoch + sequence number, or the user
    /// message's store id): a resend is stored once (SPEC M-3).
    public var dedupKey: String?

    /// A message to store in `channel`'s history.
    public init(appId: String, channelType: String, channel: String, message: HistoryMessage, dedupKey: String?) {
        self.appId = appId
        self.channelType = channelType
        self.channel = channel
        self.message = message
        self.dedupKey = dedupKey
    }

    /// The history name of a conversation between two users: the same whoever asks.
    public static func userPair(_ a: String, _ b: String) -> String { a < b ? "\(a)\n\(b)" : "\(b)\n\(a)" }
}

/// Durable storage of metadata sets and message history, behind which the embedded SQLite
/// store sits (and a PostgreSQL one for several nodes). The server uses it through
/// `SharedServiceStore`, which adds the writes' compare-and-set and the change notices. Called
/// by one owner (`StorageService`) from its own queue (never an event loop), so calls may
/// block.
public protocol ServiceStore: Sendable {
    /// The stored set, or nil (never written).
    func loadMetadata(_ key: StorageKey) throws -> Metadata?
    /// Replaces the stored set. An empty set is kept with its revision (a set emptied by a
    /// remove goes on from its revision; deleting it would let a stale revision match again).
    func saveMetadata(_ key: StorageKey, _ metadata: Metadata) throws
    /// Appends a history message, its timestamp made unique within the channel (moved forward
    /// by a millisecond past the newest where needed: timestamps are the paging cursor, and a
    /// page boundary must never split equal ones). Returns the timestamp it was stored with;
    /// nil when one with the same `dedupKey` is already stored (nothing is written).
    func appendHistory(_ record: HistoryRecord) throws -> Int64?
    /// Up to `limit` messages with `end <= ts < start`, newest first.
    func history(appId: String, channelType: String, channel: String, start: Int64, end: Int64, limit: Int) throws -> [HistoryMessage]
    /// Deletes history older than `millis`; returns how many.
    func trimHistory(olderThan millis: Int64) throws -> Int
}
