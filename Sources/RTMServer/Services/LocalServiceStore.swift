import NIOConcurrencyHelpers
import RTMProtocol

/// A single node's metadata and history store, as the server uses every such store
/// (`SharedServiceStore`): the embedded store (`SQLiteServiceStore`) with this node's locks
/// answering a write's lock guard. A cluster's store (RTMPostgres' `PostgresServices`) keeps
/// the same rules across nodes; both run the same contract tests.
///
/// This process is the only writer: a write's lock check, read, change and write run under
/// one lock, so of two writes expecting the same revision exactly one wins (§2.11). There are
/// no other nodes to tell or to hear from.
final class LocalServiceStore: SharedServiceStore {
    /// Whether a guard's owner holds its lock of the set's channel now (`MemoryLockStore.holds`).
    typealias LockHolder = @Sendable (MetadataLockGuard, StorageKey) -> Bool

    private let base: any ServiceStore
    private let lockHolder: LockHolder
    /// One write at a time (read, check and write of a set).
    private let writing = NIOLock()

    /// `base` as the seam; `lockHolder` answers lock guards from this node's locks.
    init(_ base: any ServiceStore, lockHolder: @escaping LockHolder) {
        self.base = base
        self.lockHolder = lockHolder
    }

    func modifyMetadata(_ key: StorageKey, requiredLock: MetadataLockGuard?,
                        _ change: @escaping @Sendable (Metadata?) throws -> Metadata) throws -> Metadata {
        try writing.withLock {
            if let requiredLock, !lockHolder(requiredLock, key) { throw requiredLock.notHeld }
            let metadata = try change(try base.loadMetadata(key))
            try base.saveMetadata(key, metadata)
            return metadata
        }
    }

    func loadMetadata(_ key: StorageKey) throws -> Metadata? {
        try base.loadMetadata(key)
    }

    func saveMetadata(_ key: StorageKey, _ metadata: Metadata) throws {
        try writing.withLock { try base.saveMetadata(key, metadata) }
    }

    func appendHistory(_ record: HistoryRecord) throws -> Int64? {
        try base.appendHistory(record)
    }

    func history(appId: String, channelType: String, channel: String, start: Int64, end: Int64, limit: Int) throws -> [HistoryMessage] {
        try base.history(appId: appId, channelType: channelType, channel: channel, start: start, end: end, limit: limit)
    }

    func trimHistory(olderThan millis: Int64) throws -> Int {
        try base.trimHistory(olderThan: millis)
    }

    /// No other node to tell.
    func announce(_ notice: StorageChangeNotice) {}

    /// No other node to hear from.
    func followStorage(_ changed: @escaping @Sendable (StorageChangeNotice) -> Void) {}

    /// Nothing to connect: the embedded store is open.
    func start() async throws {}

    /// Nothing to close.
    func stop() async {}
}
