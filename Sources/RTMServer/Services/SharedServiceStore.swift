import RTMProtocol

/// The metadata and history store as the server uses it (`StorageService`), for a cluster
/// shared by several nodes (RTMPostgres' `PostgresServices`, `rtm serve --postgres URL`) and
/// for a single node alike (`LocalServiceStore`, over the embedded SQLite store). On top of
/// `ServiceStore`:
///
/// - **Compare-and-set** (`modifyMetadata`): the read, the revision check and the write of a
///   set run in one transaction that excludes every other writer of the same set (on any
///   node), so of two writes expecting the same revision exactly one wins (§2.11).
/// - **Storage events across nodes**: after a write commits, its node `announce`s it; every
///   other node hears of it through `followStorage`, reads the set again and tells its own
///   subscribers (a single node has no one to tell).
///
/// `StorageService` does not cache sets (other nodes may write them).
public protocol SharedServiceStore: ServiceStore {
    /// Reads `key`'s set (nil: never written), calls `change` with it and stores what it
    /// returns, all in one transaction that no other writer of `key` (on any node) interleaves
    /// with. When `requiredLock` is set, the transaction first checks that its owner holds that
    /// lock of the channel (`key.target`) and throws a `SharedStoreRefusal`
    /// (`storageLockNotAcquired`) otherwise. An error thrown by `change` is rethrown and
    /// nothing is written. Returns the stored set. `change` is a pure function of the set (it
    /// may be called on another thread).
    func modifyMetadata(_ key: StorageKey, requiredLock: MetadataLockGuard?,
                        _ change: @escaping @Sendable (Metadata?) throws -> Metadata) throws -> Metadata
    /// Tells the other nodes that a set changed (after the write committed, never inside it).
    func announce(_ notice: StorageChangeNotice)
    /// Calls `changed` (one call at a time) for every change another node announces.
    func followStorage(_ changed: @escaping @Sendable (StorageChangeNotice) -> Void)
    /// Connects (the server's start, before it serves).
    func start() async throws
    /// Stops following and closes the store's connections (the server's shutdown).
    func stop() async
}

/// A metadata write that only the holder of a channel lock may make (`lockName`, §2.11).
public struct MetadataLockGuard: Sendable, Equatable {
    /// The lock of the channel whose metadata is written.
    public var lockName: String
    /// Who must hold it (the writer).
    public var owner: String

    public init(lockName: String, owner: String) {
        self.lockName = lockName
        self.owner = owner
    }

    /// The refusal of a write whose writer does not hold the lock (`storageLockNotAcquired`),
    /// the same from a local store and a shared one.
    public var notHeld: RequestRefusal {
        RequestRefusal(code: .storageLockNotAcquired, reason: "the write needs lock '\(lockName)', which '\(owner)' does not hold")
    }
}

/// A committed metadata change, as nodes announce it to each other.
public struct StorageChangeNotice: Sendable, Equatable {
    public var key: StorageKey
    /// What the write was (set, update, remove).
    public var kind: StorageEventKind
    /// The set's revision after the write.
    public var majorRevision: Int64
    /// Channel metadata written with `notifyAll`: every member hears of it, not only those
    /// subscribed with `withMetadata`.
    public var notifyAll: Bool

    public init(key: StorageKey, kind: StorageEventKind, majorRevision: Int64, notifyAll: Bool) {
        self.key = key
        self.kind = kind
        self.majorRevision = majorRevision
        self.notifyAll = notifyAll
    }
}

/// A request a shared store refuses, with the reference's error code and a reason.
public typealias SharedStoreRefusal = RequestRefusal
