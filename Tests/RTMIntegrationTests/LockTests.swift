import Foundation
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Locks end to end (AGORA_REFERENCE §2.12) with fencing tokens.
@Suite(.realTime, .serialized)
struct LockTests {
    static func lock(_ kind: LockEventKind, owner: String? = nil) -> @Sendable (RTMEvent) -> Bool {
        { if case .lock(let e) = $0 { e.kind == kind && (owner == nil || e.locks.first?.owner == owner) } else { false } }
    }

    @Test("§2.12: the holder cut off keeps the lock for its TTL (from the loss), then it is released, others see it; fencing tokens increase")
    func releasedAfterTTL() async throws {
        let harness = try await Harness.start { $0.lockTTLRange = 1...300 }
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await alice.setLock(channel: "doc", lockName: "editor", ttl: 1)
        let first = try await alice.acquireLock(channel: "doc", lockName: "editor")
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "alice")) != nil)
        do {
            try await bob.acquireLock(channel: "doc", lockName: "editor")
            Issue.record("bob acquired a held lock")
        } catch {
            #expect(error.code == .lockAcquireFailed)
        }
        #expect(try await alice.acquireLock(channel: "doc", lockName: "editor") == first)   // idempotent for the holder

        proxy.setRefuseNew(true)
        let cut = ContinuousClock.now   // before the server can see the loss: the TTL runs from a later instant
        proxy.cutAll()
        // Still held within the TTL (a release cannot come before `cut` + 1 s: a window in
        // which nothing may happen, checked from `cut`, however late this test runs)…
        #expect(await bobEvents.next(within: .milliseconds(600), where: Self.lock(.lockReleased)) == nil)
        let owner = try await bob.getLocks(channel: "doc").first?.owner
        // …still alice's, unless this answer came after the TTL could have run (a loaded machine).
        #expect(owner == "alice" || ContinuousClock.now - cut >= .seconds(1), "owner \(owner ?? "none") \(ContinuousClock.now - cut) after the cut")
        // …released once the TTL has run out: seen no earlier than 1 s after `cut`.
        #expect(await bobEvents.first(within: .seconds(15), where: Self.lock(.lockReleased)) != nil)
        #expect(ContinuousClock.now - cut >= .seconds(1))
        let second = try await bob.acquireLock(channel: "doc", lockName: "editor")
        #expect(second > first)
        #expect(try await bob.getLocks(channel: "doc") == [LockDetail(lockName: "editor", owner: "bob", ttl: 1, fencingToken: second)])

        // Alice comes back: the lock she held was lost (lockExpired after her snapshot).
        proxy.setRefuseNew(false)
        #expect(await aliceEvents.first(within: .seconds(15)) { $0.link?.operation == .reconnected } != nil)
        try await alice.subscribe("doc", options: SubscribeOptions(withLock: true))
        let expired = await aliceEvents.first(within: .seconds(15), where: Self.lock(.lockExpired))
        guard case .lock(let event)? = expired else { Issue.record("no lockExpired"); return }
        #expect(event.locks.map(\.lockName) == ["editor"])
        await bob.logout()
        await alice.logout()
        try? await proxy.stop()
    }

    @Test("§2.12: subscribing again with withLock turns lock events on for a channel subscribed without")
    func resubscribeChangesOptions() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("doc")
        try await alice.setLock(channel: "doc", lockName: "L")
        // The lockSet event was queued to bob's event loop before alice's reply; a round trip
        // on bob's connection makes sure the loop ran it before the options change (an event
        // racing an option change in the same loop tick may go either way).
        _ = try await bob.getLocks(channel: "doc")
        try await bob.subscribe("doc", options: SubscribeOptions(withLock: true))
        #expect(await bobEvents.first(within: soon, where: Self.lock(.snapshot)) != nil)
        try await alice.acquireLock(channel: "doc", lockName: "L")
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "alice")) != nil)
        #expect(await bobEvents.matching(Self.lock(.lockSet)).isEmpty)   // sent before the options changed
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.12: a holder that comes back within the TTL keeps the lock")
    func returnWithinTTLKeeps() async throws {
        let harness = try await Harness.start { $0.lockTTLRange = 1...300 }
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("doc", options: SubscribeOptions(withLock: true))
        // A 5 s TTL: alice is back well within it, however loaded the machine.
        try await alice.setLock(channel: "doc", lockName: "editor", ttl: 5)
        let token = try await alice.acquireLock(channel: "doc", lockName: "editor")
        let cut = ContinuousClock.now
        proxy.cutAll()
        #expect(await aliceEvents.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        #expect(ContinuousClock.now - cut < .seconds(5), "back \(ContinuousClock.now - cut) after the cut: not within the TTL")
        // No release until well past where the TTL from the cut would have ended (the rule
        // broken): a window in which nothing may happen, up to 6 s after the cut.
        let window = cut + .seconds(6) - ContinuousClock.now
        #expect(await bobEvents.next(within: max(window, .zero), where: Self.lock(.lockReleased)) == nil)
        #expect(try await bob.getLocks(channel: "doc").first == LockDetail(lockName: "editor", owner: "alice", ttl: 5, fencingToken: token))
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("§2.12: acquire with retry waits and gets the lock on release, first come first served; revoke, remove, logout releases at once")
    func retryRevokeRemoveLogout() async throws {
        let harness = try await Harness.start { $0.lockTTLRange = 1...300 }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        let (carol, carolEvents) = try await Harness.client("carol", port: harness.port)
        try await carol.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await alice.setLock(channel: "doc", lockName: "L", ttl: 10)
        do {
            try await alice.setLock(channel: "doc", lockName: "L", ttl: 20)
            Issue.record("a lock was defined twice with different TTLs")
        } catch {
            #expect(error.code == .lockAlreadyExist)
        }
        let t1 = try await alice.acquireLock(channel: "doc", lockName: "L")
        // A second wait from the same client replaces the first, which is told so.
        let superseded = Task { try await bob.acquireLock(channel: "doc", lockName: "L", retry: true) }
        // The first wait is registered before the second is sent.
        let key = LockService.LockKey(appId: Harness.appId, channel: "doc", name: "L")
        #expect(await waitUntil { harness.server.hub.locks.firstWaiter(of: key) != nil })
        let waiting = Task { try await bob.acquireLock(channel: "doc", lockName: "L", retry: true) }
        do {
            _ = try await superseded.value
            Issue.record("the superseded wait got the lock")
        } catch {
            #expect((error as? RTMError)?.code == .duplicateOperation)
        }
        // Bob is queued (his acquire is not answered while alice holds it).
        #expect(await carolEvents.next(within: .milliseconds(300), where: Self.lock(.lockAcquired, owner: "bob")) == nil)
        do {
            try await carol.releaseLock(channel: "doc", lockName: "L")
            Issue.record("a non-holder released the lock")
        } catch {
            #expect(error.code == .lockNotAcquired)
        }
        try await alice.releaseLock(channel: "doc", lockName: "L")
        let t2 = try await waiting.value
        #expect(t2 > t1)
        #expect(await carolEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "bob")) != nil)
        try await carol.revokeLock(channel: "doc", lockName: "L", owner: "bob")
        #expect(try await carol.getLocks(channel: "doc").first?.owner == "")
        let t3 = try await alice.acquireLock(channel: "doc", lockName: "L")
        #expect(t3 > t2)
        await carolEvents.clear()
        await alice.logout()   // intentional: released at once, no TTL
        #expect(await carolEvents.first(within: .milliseconds(500), where: Self.lock(.lockReleased)) != nil)
        try await carol.removeLock(channel: "doc", lockName: "L")
        #expect(await carolEvents.first(within: soon, where: Self.lock(.lockRemoved)) != nil)
        #expect(try await carol.getLocks(channel: "doc").isEmpty)
        do {
            try await carol.acquireLock(channel: "doc", lockName: "L")
            Issue.record("acquired a removed lock")
        } catch {
            #expect(error.code == .lockNotExist)
        }
        do {
            try await carol.setLock(channel: "doc", lockName: "M", ttl: 0)
            Issue.record("a TTL out of range was accepted")
        } catch {
            #expect(error.code == .invalidParameter)
        }
        await bob.logout()
        await carol.logout()
    }
}
