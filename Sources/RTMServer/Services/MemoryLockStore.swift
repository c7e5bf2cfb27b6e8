import NIOConcurrencyHelpers
import NIOCore
import RTMProtocol

/// A single node's locks (§2.12): the in-memory implementation of the `SharedLockStore` seam,
/// so that one node and a cluster run the same lock code (`LockService`, Hub+Locks); a
/// cluster's PostgreSQL store (`PostgresServices`) implements the same protocol. The rules are
/// `LockTable`'s; there are no other nodes to tell or to hear from.
final class MemoryLockStore: SharedLockStore {
    private let table = NIOLockedValueBox(LockTable())
    private let now: @Sendable () -> NIODeadline
    private let wallMillis: @Sendable () -> Int64

    /// `now` and `wallMillis` are the clocks (tests pass their own).
    init(now: @escaping @Sendable () -> NIODeadline = { .now() }, wallMillis: @escaping @Sendable () -> Int64 = { Hub.wallMillis }) {
        self.now = now
        self.wallMillis = wallMillis
    }

    func perform(_ operation: SharedLockOperation, appId: String, channel: String, name: String, user: String) -> SharedLockResult {
        let wall = wallMillis()
        return table.withLockedValue { $0.perform(operation, appId: appId, channel: channel, name: name, user: user, wallMillis: wall) }
    }

    func locks(appId: String, channel: String) -> [LockDetail] {
        table.withLockedValue { $0.locks(appId: appId, channel: channel) }
    }

    /// Whether `user` holds lock `name` of `channel` now (the metadata write's lock guard).
    func holds(_ user: String, lock name: String, appId: String, channel: String) -> Bool {
        table.withLockedValue { $0.holds(user, lock: name, appId: appId, channel: channel) }
    }

    func ownerOffline(appId: String, user: String) {
        let now = now()
        table.withLockedValue { $0.ownerOffline(appId: appId, user: user, now: now) }
    }

    func ownerOnline(appId: String, user: String) {
        table.withLockedValue { $0.ownerOnline(appId: appId, user: user) }
    }

    func releaseAll(appId: String, user: String) -> [SharedLockChange] {
        table.withLockedValue { $0.releaseAll(appId: appId, user: user) }
    }

    /// No other node: nothing to do.
    func nodeDied(_ node: String) {}

    func sweep() -> [SharedLockChange] {
        let now = now()
        return table.withLockedValue { $0.sweep(now: now) }
    }

    /// No other node to tell.
    func announce(_ changes: [SharedLockChange]) {}

    /// No other node to hear from.
    func followLocks(_ changed: @escaping @Sendable ([SharedLockChange]) -> Void) {}
}
