import RTMProtocol
import RTMServer
import Testing

/// A lock store under test (`SharedLockStore`, AGORA_REFERENCE §2.12): the store, an
/// application no other case uses, and a way to let its time pass.
public struct LockStoreSubject: Sendable {
    public let store: any SharedLockStore
    /// The application the case works in (stores shared by several cases keep them apart by it).
    public let appId: String
    /// Lets `seconds` pass for the store's due times (an in-memory store's test clock moves
    /// forward; a database's due times move back).
    public let elapse: @Sendable (_ seconds: Int) async throws -> Void

    /// A subject over `store`.
    public init(store: any SharedLockStore, appId: String, elapse: @escaping @Sendable (_ seconds: Int) async throws -> Void) {
        self.store = store
        self.appId = appId
        self.elapse = elapse
    }

    func perform(_ operation: SharedLockOperation, channel: String = "ch", _ name: String, by user: String) async throws -> SharedLockResult {
        try await store.perform(operation, appId: appId, channel: channel, name: name, user: user)
    }

    /// Creates lock `name` (ttl `ttl`) and lets `user` acquire it; its fencing token.
    func held(_ name: String, channel: String = "ch", ttl: Int = 60, by user: String) async throws -> UInt64 {
        _ = try await perform(.set(ttl: ttl, maxLocks: 32), channel: channel, name, by: user)
        return try #require(try await perform(.acquire, channel: channel, name, by: user).detail).fencingToken
    }

    /// The sweep's changes in this case's application (a shared store sweeps every one).
    func sweep() async throws -> [SharedLockChange] {
        try await store.sweep().filter { $0.appId == appId }
    }
}

extension SharedLockResult {
    /// The lock after a done operation.
    var detail: LockDetail? {
        if case .done(let detail, _) = self { detail } else { nil }
    }

    /// The change a done operation announces.
    var change: SharedLockChange?? {
        if case .done(_, let change) = self { change } else { nil }
    }

    /// The code of a refusal.
    var refusal: RTMErrorCode? {
        if case .refused(let refusal) = self { refusal.code } else { nil }
    }
}

/// The rules every `SharedLockStore` keeps (§2.12), one node's (`MemoryLockStore`) and a
/// cluster's (`PostgresServices`) alike. Waiting acquirers (`retry`) are the node's own
/// connections, kept by `LockService`, not the store: they are not part of this seam.
public enum LockStoreContract {
    /// Every rule.
    public static let cases: [ContractCase<LockStoreSubject>] = [
        .init("§2.12 set: a new lock is free; set again with its ttl changes nothing; with another ttl is refused (lockAlreadyExist)") { s async throws in
            let set = try await s.perform(.set(ttl: 10, maxLocks: 32), "L", by: "alice")
            #expect(set == .done(LockDetail(lockName: "L", ttl: 10),
                                 change: SharedLockChange(appId: s.appId, channel: "ch", kind: .lockSet, detail: LockDetail(lockName: "L", ttl: 10))))
            #expect(try await s.perform(.set(ttl: 10, maxLocks: 32), "L", by: "bob") == .done(LockDetail(lockName: "L", ttl: 10), change: nil))
            #expect(try await s.perform(.set(ttl: 20, maxLocks: 32), "L", by: "bob").refusal == .lockAlreadyExist)
        },
        .init("§2.12 set: at most maxLocks per channel (lockOperationFailed); other channels do not count") { s async throws in
            for name in ["A", "B"] { #expect(try await s.perform(.set(ttl: 10, maxLocks: 2), name, by: "alice").detail != nil) }
            #expect(try await s.perform(.set(ttl: 10, maxLocks: 2), "C", by: "alice").refusal == .lockOperationFailed)
            #expect(try await s.perform(.set(ttl: 10, maxLocks: 2), channel: "other", "C", by: "alice").detail != nil)
        },
        .init("§2.12 acquire: the first caller owns it with a token (lockAcquired); the holder again gets the same token and no change; another user is refused (lockAcquireFailed)") { s async throws in
            _ = try await s.perform(.set(ttl: 10, maxLocks: 32), "L", by: "alice")
            let acquired = try await s.perform(.acquire, "L", by: "alice")
            let token = try #require(acquired.detail?.fencingToken)
            #expect(token > 0)
            let owned = LockDetail(lockName: "L", owner: "alice", ttl: 10, fencingToken: token)
            #expect(acquired == .done(owned, change: SharedLockChange(appId: s.appId, channel: "ch", kind: .lockAcquired, detail: owned)))
            #expect(try await s.perform(.acquire, "L", by: "alice") == .done(owned, change: nil))
            #expect(try await s.perform(.acquire, "L", by: "bob").refusal == .lockAcquireFailed)
            #expect(try await s.perform(.set(ttl: 10, maxLocks: 32), "L", by: "bob") == .done(owned, change: nil))
        },
        .init("§2.12 fencing tokens: every acquisition gets a larger one, across locks and channels") { s async throws in
            var tokens = [try await s.held("A", by: "alice"), try await s.held("B", channel: "other", by: "bob")]
            _ = try await s.perform(.release, "A", by: "alice")
            tokens.append(try #require(try await s.perform(.acquire, "A", by: "carol").detail).fencingToken)
            #expect(tokens == tokens.sorted() && Set(tokens).count == 3, "\(tokens)")
        },
        .init("§2.12 release: only by the owner (lockNotAcquired); a released lock is free, token 0 (lockReleased)") { s async throws in
            _ = try await s.held("L", ttl: 10, by: "alice")
            #expect(try await s.perform(.release, "L", by: "bob").refusal == .lockNotAcquired)
            let free = LockDetail(lockName: "L", ttl: 10)
            #expect(try await s.perform(.release, "L", by: "alice")
                    == .done(free, change: SharedLockChange(appId: s.appId, channel: "ch", kind: .lockReleased, detail: free)))
            #expect(try await s.perform(.release, "L", by: "alice").refusal == .lockNotAcquired)
            #expect(try await s.perform(.acquire, "L", by: "bob").detail?.owner == "bob")
        },
        .init("§2.12 revoke: releases the named owner's hold; naming someone else is refused (lockNotAcquired)") { s async throws in
            _ = try await s.held("L", by: "alice")
            #expect(try await s.perform(.revoke(owner: "bob"), "L", by: "admin").refusal == .lockNotAcquired)
            #expect(try await s.perform(.revoke(owner: "alice"), "L", by: "admin").change??.kind == .lockReleased)
            #expect(try await s.store.locks(appId: s.appId, channel: "ch") == [LockDetail(lockName: "L", ttl: 60)])
        },
        .init("§2.12 remove: the lock goes (lockRemoved, as it was); every operation on a missing lock is refused (lockNotExist)") { s async throws in
            let token = try await s.held("L", by: "alice")
            let was = LockDetail(lockName: "L", owner: "alice", ttl: 60, fencingToken: token)
            #expect(try await s.perform(.remove, "L", by: "bob")
                    == .done(was, change: SharedLockChange(appId: s.appId, channel: "ch", kind: .lockRemoved, detail: was)))
            for operation in [SharedLockOperation.acquire, .release, .revoke(owner: "alice"), .remove] {
                #expect(try await s.perform(operation, "L", by: "alice").refusal == .lockNotExist, "\(operation)")
            }
            #expect(try await s.store.locks(appId: s.appId, channel: "ch").isEmpty)
        },
        .init("§2.12 locks: a channel's locks sorted by name (code point order), each with its owner and token; other channels and apps apart") { s async throws in
            _ = try await s.perform(.set(ttl: 5, maxLocks: 32), "b", by: "alice")
            let token = try await s.held("a", ttl: 7, by: "alice")
            for name in ["B", "_z", "A1"] { _ = try await s.perform(.set(ttl: 5, maxLocks: 32), name, by: "alice") }
            _ = try await s.held("c", channel: "other", by: "bob")
            let locks = try await s.store.locks(appId: s.appId, channel: "ch")
            #expect(locks.map(\.lockName) == ["A1", "B", "_z", "a", "b"])
            #expect(locks.suffix(2) == [LockDetail(lockName: "a", owner: "alice", ttl: 7, fencingToken: token), LockDetail(lockName: "b", ttl: 5)])
            #expect(try await s.store.locks(appId: s.appId + "-other", channel: "ch").isEmpty)
        },
        .init("§2.12 TTL: an owner gone offline keeps its locks for ttl; then the sweep releases them (lockReleased)") { s async throws in
            _ = try await s.held("L", ttl: 60, by: "alice")
            try await s.store.ownerOffline(appId: s.appId, user: "alice")
            try await s.elapse(30)
            #expect(try await s.sweep().isEmpty)
            #expect(try await s.store.locks(appId: s.appId, channel: "ch").first?.owner == "alice")
            try await s.elapse(31)
            #expect(try await s.sweep() == [SharedLockChange(appId: s.appId, channel: "ch", kind: .lockReleased, detail: LockDetail(lockName: "L", ttl: 60))])
            #expect(try await s.store.locks(appId: s.appId, channel: "ch") == [LockDetail(lockName: "L", ttl: 60)])
        },
        .init("§2.12 TTL: an owner back within ttl keeps its locks and its token; so does a holder acquiring again (a resend)") { s async throws in
            let a = try await s.held("A", ttl: 60, by: "alice")
            let b = try await s.held("B", ttl: 60, by: "bob")
            try await s.store.ownerOffline(appId: s.appId, user: "alice")
            try await s.store.ownerOffline(appId: s.appId, user: "bob")
            try await s.store.ownerOnline(appId: s.appId, user: "alice")
            #expect(try await s.perform(.acquire, "B", by: "bob") == .done(LockDetail(lockName: "B", owner: "bob", ttl: 60, fencingToken: b), change: nil))
            try await s.elapse(61)
            #expect(try await s.sweep().isEmpty)
            #expect(try await s.store.locks(appId: s.appId, channel: "ch").map(\.fencingToken) == [a, b])
        },
        .init("§2.12 logout: releaseAll frees the user's locks in the app at once, sorted by channel then name; nobody else's") { s async throws in
            _ = try await s.held("b", channel: "ch2", by: "alice")
            _ = try await s.held("a", channel: "ch2", by: "alice")
            _ = try await s.held("z", channel: "ch1", by: "alice")
            _ = try await s.held("y", channel: "ch1", by: "bob")
            let released = try await s.store.releaseAll(appId: s.appId, user: "alice")
            #expect(released.map { "\($0.channel)/\($0.detail.lockName)" } == ["ch1/z", "ch2/a", "ch2/b"])
            #expect(released.allSatisfy { $0.kind == .lockReleased && $0.detail.owner.isEmpty && $0.appId == s.appId })
            #expect(try await s.store.locks(appId: s.appId, channel: "ch1").map(\.owner) == ["bob", ""])
        },
    ]
}
