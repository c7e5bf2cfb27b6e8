import Foundation
import RTMProtocol

/// What a metadata set belongs to: a channel's or a user's (per application).
struct StorageKey: Hashable, Sendable {
    let appId: String
    let type: StorageType
    /// Channel name or user id.
    let target: String
}

/// A message kept in a channel's history (`storeInHistory`, AGORA_REFERENCE §2.8).
struct HistoryRecord: Sendable, Equatable {
    let appId: String
    /// `"message"` or `"user"`.
    let channelType: String
    /// Message channel name; for user messages, the two user ids joined (see `HistoryRecord.userPair`).
    let channel: String
    let message: HistoryMessage
    /// Identifies the message across resends (channel epoch + sequence number, or the user
    /// message's store id): a resend is stored once (SPEC M-3).
    var dedupKey: String?

    /// The history name of a conversation between two users: the same whoever asks.
    static func userPair(_ a: String, _ b: String) -> String { a < b ? "\(a)\n\(b)" : "\(b)\n\(a)" }
}

/// Durable storage of metadata sets and message history, behind which the embedded SQLite
/// store sits (and a PostgreSQL one for several nodes). Called by one owner
/// (`StorageService`) from its own queue; an implementation need not be reentrant.
protocol ServiceStore: Sendable {
    /// The stored set, or nil.
    func loadMetadata(_ key: StorageKey) throws -> Metadata?
    /// Replaces the stored set; an empty set is deleted.
    func saveMetadata(_ key: StorageKey, _ metadata: Metadata) throws
    /// Appends a history message; false when one with the same `dedupKey` is already stored.
    func appendHistory(_ record: HistoryRecord) throws -> Bool
    /// The newest stored timestamp of a channel's history (0 if none).
    func lastHistoryTs(appId: String, channelType: String, channel: String) throws -> Int64
    /// Up to `limit` messages with `end <= ts < start`, newest first.
    func history(appId: String, channelType: String, channel: String, start: Int64, end: Int64, limit: Int) throws -> [HistoryMessage]
    /// Deletes history older than `millis`; returns how many.
    func trimHistory(olderThan millis: Int64) throws -> Int
}
