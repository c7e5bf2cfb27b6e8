import NIOCore
import RTMProtocol
import Testing
@testable import RTMServer

/// A single node's locks as a value, time passed in (AGORA_REFERENCE §2.12): set, acquire,
/// release, revoke, remove, release on logout, release `ttl` after the owner went offline
/// unless it came back; fencing tokens that only increase. The hand-over to waiters is the
/// lock service's, the same on one node and in a cluster (LockTests, ClusterServicesTests).
struct LockTableTests {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let wall: Int64 = 1_800_000_000_000

    private static func perform(_ table: inout LockTable, _ operation: SharedLockOperation, _ user: String, wall: Int64) -> SharedLockResult {
        table.perform(operation, appId: "app", channel: "room", name: "L", user: user, wallMillis: wall)
    }

    private static func event(_ result: SharedLockResult) -> String? {
        guard case .done(_, let change?) = result else { return nil }
        return "\(change.kind.rawValue) \(change.detail.owner)"
    }

    private static func code(_ result: SharedLockResult) -> RTMErrorCode? {
        if case .refused(let refusal) = result { refusal.code } else { nil }
    }

    private static func token(_ result: SharedLockResult) -> UInt64? {
        if case .done(let detail, _) = result, !detail.owner.isEmpty { detail.fencingToken } else { nil }
    }

    @Test("§2.12: set once (the same ttl again is no change, another ttl refused), acquire, the holder's acquire again keeps its token, another's refused; release only by the holder")
    func setAcquireRelease() throws {
        var table = LockTable()
        #expect(Self.event(Self.perform(&table, .set(ttl: 10, maxLocks: 10), "alice", wall: wall)) == "lockSet ")
        #expect(Self.event(Self.perform(&table, .set(ttl: 10, maxLocks: 10), "bob", wall: wall)) == nil)
        #expect(Self.code(Self.perform(&table, .set(ttl: 20, maxLocks: 10), "bob", wall: wall)) == .lockAlreadyExist)
        let first = Self.perform(&table, .acquire, "alice", wall: wall)
        #expect(Self.event(first) == "lockAcquired alice")
        let token = try #require(Self.token(first))
        let again = Self.perform(&table, .acquire, "alice", wall: wall + 5)
        #expect(Self.token(again) == token && Self.event(again) == nil)   // a resend: same token, no event
        #expect(Self.code(Self.perform(&table, .acquire, "bob", wall: wall)) == .lockAcquireFailed)
        #expect(Self.code(Self.perform(&table, .release, "bob", wall: wall)) == .lockNotAcquired)
        #expect(table.holds("alice", lock: "L", appId: "app", channel: "room"))
        #expect(Self.event(Self.perform(&table, .release, "alice", wall: wall)) == "lockReleased ")
        #expect(!table.holds("alice", lock: "L", appId: "app", channel: "room"))
        #expect(table.locks(appId: "app", channel: "room") == [LockDetail(lockName: "L", owner: "", ttl: 10, fencingToken: 0)])
        #expect(table.locks(appId: "other", channel: "room").isEmpty)
    }

    @Test("§2.12: the per-channel limit refuses one more lock with lockOperationFailed")
    func perChannelLimit() {
        var table = LockTable()
        for name in ["a", "b"] {
            _ = table.perform(.set(ttl: 10, maxLocks: 2), appId: "app", channel: "room", name: name, user: "alice", wallMillis: wall)
        }
        let third = table.perform(.set(ttl: 10, maxLocks: 2), appId: "app", channel: "room", name: "c", user: "alice", wallMillis: wall)
        #expect(Self.code(third) == .lockOperationFailed)
        #expect(table.locks(appId: "app", channel: "room").map(\.lockName) == ["a", "b"])
    }

    @Test("§2.12: an owner gone offline keeps its lock for the TTL (from then); back in time it keeps it, otherwise the sweep at the due time releases it")
    func ttlAfterTheOwnerIsLost() {
        var table = LockTable()
        _ = Self.perform(&table, .set(ttl: 10, maxLocks: 10), "alice", wall: wall)
        _ = Self.perform(&table, .acquire, "alice", wall: wall)
        let lostAt = start + .seconds(2)
        table.ownerOffline(appId: "app", user: "alice", now: lostAt)
        #expect(table.sweep(now: lostAt + .seconds(9)).isEmpty)
        table.ownerOnline(appId: "app", user: "alice")   // back (on this node or, in a cluster, another)
        #expect(table.sweep(now: lostAt + .seconds(30)).isEmpty)
        #expect(table.holds("alice", lock: "L", appId: "app", channel: "room"))
        // Lost again, not back: released when due, and only then.
        let again = start + .seconds(40)
        table.ownerOffline(appId: "app", user: "alice", now: again)
        table.ownerOffline(appId: "app", user: "alice", now: again + .seconds(5))   // a second report keeps the first due time
        #expect(table.sweep(now: again + .seconds(10) - .nanoseconds(1)).isEmpty)
        let released = table.sweep(now: again + .seconds(10))
        #expect(released.map { "\($0.kind.rawValue) \($0.channel) \($0.detail.lockName)" } == ["lockReleased room L"])
        #expect(!table.holds("alice", lock: "L", appId: "app", channel: "room"))
        #expect(table.sweep(now: again + .seconds(60)).isEmpty)
    }

    @Test("§2.12: logout releases every lock of the user at once, in channel and name order; revoke frees another's lock; remove deletes it")
    func logoutRevokeRemove() {
        var table = LockTable()
        for (channel, name) in [("b", "y"), ("a", "z"), ("a", "x")] {
            _ = table.perform(.set(ttl: 60, maxLocks: 10), appId: "app", channel: channel, name: name, user: "alice", wallMillis: wall)
            _ = table.perform(.acquire, appId: "app", channel: channel, name: name, user: "alice", wallMillis: wall)
        }
        let released = table.releaseAll(appId: "app", user: "alice")
        #expect(released.map { "\($0.channel)/\($0.detail.lockName)" } == ["a/x", "a/z", "b/y"])
        #expect(table.releaseAll(appId: "app", user: "alice").isEmpty)
        _ = table.perform(.acquire, appId: "app", channel: "a", name: "x", user: "bob", wallMillis: wall)
        #expect(Self.code(table.perform(.revoke(owner: "carol"), appId: "app", channel: "a", name: "x", user: "alice", wallMillis: wall)) == .lockNotAcquired)
        #expect(Self.event(table.perform(.revoke(owner: "bob"), appId: "app", channel: "a", name: "x", user: "alice", wallMillis: wall)) == "lockReleased ")
        _ = table.perform(.acquire, appId: "app", channel: "a", name: "x", user: "bob", wallMillis: wall)
        #expect(Self.event(table.perform(.remove, appId: "app", channel: "a", name: "x", user: "alice", wallMillis: wall)) == "lockRemoved bob")
        #expect(Self.code(table.perform(.acquire, appId: "app", channel: "a", name: "x", user: "bob", wallMillis: wall)) == .lockNotExist)
    }

    @Test("§2.12: fencing tokens are at least the wall clock in microseconds and increase at every grant, even within one millisecond")
    func fencingTokens() throws {
        var table = LockTable()
        _ = Self.perform(&table, .set(ttl: 10, maxLocks: 10), "alice", wall: wall)
        let first = try #require(Self.token(Self.perform(&table, .acquire, "alice", wall: wall)))
        #expect(first >= UInt64(wall) * 1000)
        _ = Self.perform(&table, .release, "alice", wall: wall)
        let second = try #require(Self.token(Self.perform(&table, .acquire, "alice", wall: wall)))
        #expect(second == first + 1)
        _ = Self.perform(&table, .release, "alice", wall: wall)
        let third = try #require(Self.token(Self.perform(&table, .acquire, "alice", wall: wall - 1_000)))   // the clock stepped back
        #expect(third == second + 1)
    }
}
