import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// Locks on one node as a value, time passed in (AGORA_REFERENCE §2.12): set, acquire, wait,
/// hand-over, release on logout, release `ttl` after the owner went offline unless it came back,
/// revoke, remove; fencing tokens that only increase.
struct HubStateLockTests {
    private let room = ChannelKey(appId: "app", name: "room")
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let wall: Int64 = 1_800_000_000_000

    private struct Users {
        var state = HubState(configuration: ServerConfiguration())
        var connections: [String: ConnectionRef] = [:]
        var tokens: [String: String] = [:]

        mutating func login(_ user: String, id: UInt64, at now: NIODeadline) {
            let connection = ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: 0)
            connections[user] = connection
            if case .admitted(let admission) = state.login(key: UserKey(appId: "app", userId: user), connection: connection,
                                                           resumeToken: tokens[user], heartbeat: .seconds(5), presenceTimeout: .seconds(15),
                                                           now: now, wallMillis: 0) {
                tokens[user] = admission.resumeToken
            }
        }

        mutating func lock(_ operation: HubState.LockOperation, _ user: String, id: UInt64 = 1, wall: Int64) -> HubState.LockOutcome {
            state.lock(operation, channel: ChannelKey(appId: "app", name: "room"), name: "L", connection: connections[user]!,
                       requestID: id, wallMillis: wall, maxLocks: 10)
        }
    }

    private static func events(_ outcome: HubState.LockOutcome) -> [String] {
        outcome.broadcasts.map { "\($0.frame.event ?? "-") \($0.frame.locks?.first?.owner ?? "")" }
    }

    private static func code(_ outcome: HubState.LockOutcome) -> RTMErrorCode? {
        if case .failure(let failure)? = outcome.reply { failure.code } else { nil }
    }

    private static func token(_ outcome: HubState.LockOutcome) -> UInt64? {
        if case .success(let frame)? = outcome.reply { frame.fencingToken } else { nil }
    }

    @Test("Locks: acquire, a second acquire refused or queued, release hands the lock to the waiter with a larger fencing token")
    func acquireWaitHandOver() throws {
        var users = Users()
        users.login("alice", id: 1, at: start)
        users.login("bob", id: 2, at: start)
        #expect(Self.events(users.lock(.set(ttl: 10), "alice", wall: wall)) == ["lockSet "])
        let first = users.lock(.acquire(retry: false), "alice", wall: wall)
        let aliceToken = try #require(Self.token(first))
        #expect(Self.events(first) == ["lockAcquired alice"])
        #expect(Self.token(users.lock(.acquire(retry: false), "alice", wall: wall)) == aliceToken)   // a resend: same token
        #expect(Self.code(users.lock(.acquire(retry: false), "bob", wall: wall)) == .lockAcquireFailed)
        let waiting = users.lock(.acquire(retry: true), "bob", id: 7, wall: wall)
        #expect(waiting.reply == nil)   // answered when it gets the lock
        #expect(Self.code(users.lock(.release, "bob", wall: wall)) == .lockNotAcquired)
        let released = users.lock(.release, "alice", wall: wall)
        #expect(Self.events(released) == ["lockReleased ", "lockAcquired bob"])
        let handed = try #require(released.directs.first)
        #expect(handed.connection == users.connections["bob"] && handed.frame.id == 7)
        #expect((handed.frame.fencingToken ?? 0) > aliceToken)
        #expect(users.state.holds("bob", lock: "L", in: room))
    }

    @Test("Locks: an owner whose connection is lost keeps the lock for its TTL; back in time it keeps it, otherwise it is released")
    func ttlAfterTheOwnerIsLost() throws {
        var users = Users()
        users.login("alice", id: 1, at: start)
        _ = users.lock(.set(ttl: 10), "alice", wall: wall)
        _ = users.lock(.acquire(retry: false), "alice", wall: wall)
        let lostAt = start + .seconds(2)
        _ = users.state.connectionLost(users.connections["alice"]!, lastSeen: lostAt, now: lostAt)
        let timers = users.state.lockOwnerLost(users.connections["alice"]!, user: UserKey(appId: "app", userId: "alice"), now: lostAt)
        let timer = try #require(timers.first)
        #expect(timers.count == 1 && timer.deadline == lostAt + .seconds(10))
        // Alice resumes before the TTL: the timer finds her online and releases nothing.
        users.login("alice", id: 3, at: start + .seconds(5))
        #expect(users.state.lockTimerFired(timer, wallMillis: wall).broadcasts.isEmpty)
        #expect(users.state.holds("alice", lock: "L", in: room))
        // Lost again, not back: released when the timer fires.
        _ = users.state.connectionLost(users.connections["alice"]!, lastSeen: start + .seconds(6), now: start + .seconds(6))
        let again = try #require(users.state.lockOwnerLost(users.connections["alice"]!, user: UserKey(appId: "app", userId: "alice"),
                                                           now: start + .seconds(6)).first)
        #expect(Self.events(users.state.lockTimerFired(again, wallMillis: wall)) == ["lockReleased "])
        #expect(!users.state.holds("alice", lock: "L", in: room))
    }

    @Test("Locks: logout releases at once; revoke frees another's lock; remove ends the waits with lockNotExist")
    func logoutRevokeRemove() throws {
        var users = Users()
        users.login("alice", id: 1, at: start)
        users.login("bob", id: 2, at: start)
        _ = users.lock(.set(ttl: 60), "alice", wall: wall)
        _ = users.lock(.acquire(retry: false), "alice", wall: wall)
        #expect(Self.events(users.state.releaseLocks(of: UserKey(appId: "app", userId: "alice"), wallMillis: wall)) == ["lockReleased "])
        _ = users.lock(.acquire(retry: false), "bob", wall: wall)
        #expect(Self.code(users.lock(.revoke(owner: "carol"), "alice", wall: wall)) == .lockNotAcquired)
        #expect(Self.events(users.lock(.revoke(owner: "bob"), "alice", wall: wall)) == ["lockReleased "])
        _ = users.lock(.acquire(retry: false), "bob", wall: wall)
        _ = users.lock(.acquire(retry: true), "alice", id: 9, wall: wall)
        let removed = users.lock(.remove, "bob", wall: wall)
        #expect(Self.events(removed) == ["lockRemoved bob"])
        #expect(removed.directs.map(\.frame.code) == [RTMErrorCode.lockNotExist.rawValue] && removed.directs.first?.frame.id == 9)
        #expect(Self.code(users.lock(.acquire(retry: false), "alice", wall: wall)) == .lockNotExist)
    }

    @Test("Locks: fencing tokens are at least the wall clock in microseconds and increase at every grant, even within one millisecond")
    func fencingTokens() throws {
        var users = Users()
        users.login("alice", id: 1, at: start)
        _ = users.lock(.set(ttl: 10), "alice", wall: wall)
        let first = try #require(Self.token(users.lock(.acquire(retry: false), "alice", wall: wall)))
        #expect(first >= UInt64(wall) * 1000)
        _ = users.lock(.release, "alice", wall: wall)
        let second = try #require(Self.token(users.lock(.acquire(retry: false), "alice", wall: wall)))
        #expect(second == first + 1)
    }
}
