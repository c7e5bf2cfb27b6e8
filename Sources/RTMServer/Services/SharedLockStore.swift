import RTMProtocol

/// Metadata, history and locks shared by the nodes of a cluster
/// (`ServerConfiguration.sharedServices`).
public typealias SharedServices = SharedServiceStore & SharedLockStore

/// Locks shared by several nodes (cluster mode; RTMPostgres' `PostgresServices`):
/// the locks of every channel, their owners and one fencing-token sequence for the whole
/// cluster live in the shared store, so that of two nodes acquiring a lock at once exactly one
/// gets it, and tokens increase across nodes (§2.12).
///
/// Each lock owned by a user records the node that user is on. TTL rules as on one node: a
/// lock is released `ttl` seconds after its owner is declared offline (`ownerOffline`: its
/// connection was lost and it did not come back), at once on logout (`releaseAll`), and
/// `ttl` seconds after the owner's node is declared dead (`nodeDied`); a return within the
/// TTL on any node (`ownerOnline`) keeps it. Any node releases what is due (`sweep`).
///
/// `acquireLock(retry: true)` waiters are the node's own (they are connections): the node tries
/// again for them when it hears of a release.
public protocol SharedLockStore: Sendable {
    /// Runs one lock operation for `user` (§2.12). A refusal (no such lock, held by another, …)
    /// is `.refused` with the reference's code.
    func perform(_ operation: SharedLockOperation, appId: String, channel: String, name: String,
                 user: String) async throws -> SharedLockResult
    /// The locks of a channel, sorted by name.
    func locks(appId: String, channel: String) async throws -> [LockDetail]
    /// `user` (whose connection was on this node) is offline: its locks are due for release
    /// `ttl` from now, unless it comes back.
    func ownerOffline(appId: String, user: String) async throws
    /// `user` logged in on this node: its locks are no longer due, and are on this node now.
    func ownerOnline(appId: String, user: String) async throws
    /// `user` logged out: its locks are released now.
    func releaseAll(appId: String, user: String) async throws -> [SharedLockChange]
    /// `node` was declared dead: its users' locks are due for release `ttl` from now.
    func nodeDied(_ node: String) async throws
    /// Releases every lock that is due (any node may).
    func sweep() async throws -> [SharedLockChange]
    /// Tells the other nodes of changes made here (after they committed).
    func announce(_ changes: [SharedLockChange])
    /// Calls `changed` (one call at a time) with the changes other nodes announce.
    func followLocks(_ changed: @escaping @Sendable ([SharedLockChange]) -> Void)
}

/// A lock operation (§2.12).
public enum SharedLockOperation: Sendable, Equatable {
    /// Creates the lock; `maxLocks` per channel.
    case set(ttl: Int, maxLocks: Int)
    case acquire
    case release
    /// Releases the lock held by `owner`.
    case revoke(owner: String)
    case remove
}

/// What a `SharedLockStore` operation did.
public enum SharedLockResult: Sendable, Equatable {
    /// Done: the lock now (its fencing token when owned), and the change to announce (nil when
    /// nothing changed, e.g. the holder acquiring again).
    case done(LockDetail, change: SharedLockChange?)
    /// Refused, with the reference's code and a reason.
    case refused(RequestRefusal)
}

/// A change of one lock, as the channel's members are told (a lock event).
public struct SharedLockChange: Sendable, Equatable {
    public var appId: String
    public var channel: String
    /// lockSet, lockRemoved, lockAcquired or lockReleased.
    public var kind: LockEventKind
    /// The lock after the change (removed: as it was).
    public var detail: LockDetail

    public init(appId: String, channel: String, kind: LockEventKind, detail: LockDetail) {
        self.appId = appId
        self.channel = channel
        self.kind = kind
        self.detail = detail
    }
}
