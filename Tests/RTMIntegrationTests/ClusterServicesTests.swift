import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Metadata CAS, storage events, history and locks (fencing tokens, waiters,
/// TTL after a node's death) across two real nodes sharing a real PostgreSQL, real SDK clients.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ClusterServicesTests {
    /// Two nodes with shared services (timers shrunk) on one fresh database, and the database's
    /// server. `callTimeout`: the store calls' bound. The test's scope (`TestResources`) stops
    /// them when the test ends.
    private static func databaseAndCluster(callTimeout: TimeAmount = .seconds(10), options: PostgresBackplaneOptions = ClusterTests.options())
        async throws -> (database: PostgresTestServer, a: Harness, b: Harness) {
        try await ClusterTests.cluster(options: options, configure: { name, location, logger, config in
            config.sharedServices = PostgresServices(location: location, node: name, retryInterval: .milliseconds(50),
                                                     callTimeout: callTimeout, logger: logger)
            config.lockTTLRange = 1...300
            config.lockSweepInterval = .milliseconds(50)
        })
    }

    /// The same, without the database's server.
    private static func cluster(options: PostgresBackplaneOptions = ClusterTests.options()) async throws -> (a: Harness, b: Harness) {
        let (_, a, b) = try await databaseAndCluster(options: options)
        return (a, b)
    }

    @Test("§2.11, §2.8: metadata and history with the database stopped are refused in our words, never the driver's; a write whose outcome is unknown says so")
    func storeDownInOurWords() async throws {
        // Bounded (5 s) within the test clients' 15 s request timeout: the server's reply comes
        // first; and above a loaded machine's round trip while the database runs.
        let (database, a, _) = try await Self.databaseAndCluster(callTimeout: .seconds(5))   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        _ = try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "k", value: "v0")]))
        try await database.stop()
        do {
            _ = try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "k", value: "v1")]))
            Issue.record("a metadata write with the database down succeeded")
        } catch {
            #expect(error.code == .storageOperationFailed && error.reason.hasPrefix("the store could not be written: "), "\(error)")
            #expect(!error.reason.contains("PSQLError") && !error.reason.contains("Error("), "\(error)")
        }
        do {
            _ = try await alice.getChannelMetadata("doc")
            Issue.record("a metadata read with the database down succeeded")
        } catch {
            #expect(error.code == .storageOperationFailed && error.reason.hasPrefix("the store could not be read: "), "\(error)")
            #expect(!error.reason.contains("PSQLError") && !error.reason.contains("outcome"), "\(error)")
        }
        try await database.start()
        await alice.logout()
    }

    private static func lock(_ kind: LockEventKind, owner: String? = nil) -> @Sendable (RTMEvent) -> Bool {
        LockTests.lock(kind, owner: owner)
    }

    /// A request's value, or its error's code.
    enum Outcome<Value: Equatable & Sendable>: Equatable, Sendable {
        case ok(Value)
        case failed(RTMErrorCode)

        var value: Value? { if case .ok(let value) = self { value } else { nil } }
    }

    /// An update expecting `revision`: the new revision, or the error's code.
    private static func update(_ client: RTMClient, value: String, expecting revision: Int64) async -> Outcome<Int64> {
        do {
            let set = try await client.updateChannelMetadata("doc", Metadata(majorRevision: revision, items: [MetadataItem(key: "k", value: value)]))
            return .ok(set.majorRevision)
        } catch {
            return .failed(error.code)
        }
    }

    @Test("§2.11: two nodes write a channel's metadata with the same expected revision at once: exactly one wins, the other gets storageOutdatedRevision; both nodes read the winner")
    func metadataCASAcrossNodes() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        var revision = try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "k", value: "v0")])).majorRevision
        #expect(revision == 1)
        for round in 1...10 {
            let expected = revision
            async let fromA = Self.update(alice, value: "a\(round)", expecting: expected)
            async let fromB = Self.update(bob, value: "b\(round)", expecting: expected)
            let results = await [fromA, fromB]
            let winners = results.compactMap(\.value)
            #expect(winners == [revision + 1], "round \(round): \(results)")
            #expect(results.filter { $0 == .failed(.storageOutdatedRevision) }.count == 1, "round \(round): \(results)")
            revision += 1
            let winner = results[0].value == revision ? "a\(round)" : "b\(round)"
            // Any node reads the one set (no per-node cache).
            #expect(try await bob.getChannelMetadata("doc")["k"]?.value == winner)
            #expect(try await alice.getChannelMetadata("doc") == bob.getChannelMetadata("doc"))
        }
        #expect(revision == 11)
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.11: a lock-guarded metadata write checks the lock's owner across nodes (storageLockNotAcquired for the others)")
    func lockGuardedWriteAcrossNodes() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        try await alice.setLock(channel: "doc", lockName: "editor", ttl: 10)
        _ = try await alice.acquireLock(channel: "doc", lockName: "editor")
        do {
            try await bob.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "k", value: "bob")]), lock: "editor")
            Issue.record("bob wrote without holding the lock")
        } catch {
            #expect(error.code == .storageLockNotAcquired, "\(error)")
        }
        let written = try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "k", value: "alice")]), lock: "editor")
        #expect(written["k"]?.value == "alice")
        #expect(try await bob.getChannelMetadata("doc")["k"]?.value == "alice")
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.11: a metadata change on node A reaches subscribers on node B as a storage event (channel members withMetadata, user-metadata watchers)")
    func storageEventsAcrossNodes() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        try await bob.subscribe("doc", options: SubscribeOptions(withMetadata: true))
        _ = try await bob.subscribeUserMetadata(userId: "alice")
        try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "topic", value: "cluster")]))
        let channelEvent = await bobEvents.first(within: soon) {
            if case .storage(let e) = $0 { e.storageType == .channel && e.kind != .snapshot } else { false }
        }
        guard case .storage(let channel)? = channelEvent else { Issue.record("no channel storage event on node B"); return }
        #expect(channel.target == "doc" && channel.metadata["topic"]?.value == "cluster" && channel.metadata.majorRevision == 1)
        try await alice.setUserMetadata(Metadata(items: [MetadataItem(key: "mood", value: "calm")]))
        let userEvent = await bobEvents.first(within: soon) {
            if case .storage(let e) = $0 { e.storageType == .user && e.kind != .snapshot } else { false }
        }
        guard case .storage(let user)? = userEvent else { Issue.record("no user storage event on node B"); return }
        #expect(user.target == "alice" && user.metadata["mood"]?.value == "calm")
        // Each change once on B (its own writes are not announced back to it, a re-read is not repeated).
        try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "topic", value: "again")]))
        _ = await bobEvents.first(within: soon) {
            if case .storage(let e) = $0 { e.metadata["topic"]?.value == "again" } else { false }
        }
        let revisions = await bobEvents.all.compactMap { event -> Int64? in
            if case .storage(let e) = event, e.storageType == .channel, e.kind != .snapshot { e.metadata.majorRevision } else { nil }
        }
        #expect(revisions == [1, 2])
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.8: a message stored in history on node A is served by node B")
    func historyFromAnyNode() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        for i in 1...3 { _ = try await alice.publish(channel: "room", message: "h\(i)", storeInHistory: true) }
        let page = try await bob.getMessages(channel: "room")
        #expect(page.messages.map(\.text) == ["h3", "h2", "h1"])
        #expect(Set(page.messages.map(\.ts)).count == 3)   // unique timestamps (the cursor)
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.12: two nodes acquire one lock at once: exactly one owner each round, and fencing tokens increase across nodes")
    func lockAcquireAcrossNodes() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        try await alice.setLock(channel: "doc", lockName: "L", ttl: 10)
        var last: UInt64 = 0
        for round in 1...10 {
            async let fromA = Self.acquire(alice)
            async let fromB = Self.acquire(bob)
            let results = await [fromA, fromB]
            let tokens = results.compactMap(\.value)
            #expect(tokens.count == 1, "round \(round): \(results)")
            #expect(results.filter { $0 == .failed(.lockAcquireFailed) }.count == 1, "round \(round): \(results)")
            guard let token = tokens.first else { continue }
            #expect(token > last, "round \(round): token \(token) after \(last)")
            last = token
            let owner = results[0].value == token ? alice : bob
            #expect(try await alice.getLocks(channel: "doc") == bob.getLocks(channel: "doc"))
            #expect(try await bob.getLocks(channel: "doc").first?.fencingToken == token)
            try await owner.releaseLock(channel: "doc", lockName: "L")
        }
        await alice.logout()
        await bob.logout()
    }

    private static func acquire(_ client: RTMClient, retry: Bool = false) async -> Outcome<UInt64> {
        do { return .ok(try await client.acquireLock(channel: "doc", lockName: "L", retry: retry)) } catch { return .failed(error.code) }
    }

    @Test("§2.12: a waiter (retry) on node B gets the lock released on node A, with a larger token; members on both nodes see the events")
    func waiterOnOtherNode() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        try await alice.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await bob.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await alice.setLock(channel: "doc", lockName: "L", ttl: 10)
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockSet)) != nil)   // A's change, seen on B
        let first = try await alice.acquireLock(channel: "doc", lockName: "L")
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "alice")) != nil)
        async let waited = Self.acquire(bob, retry: true)
        // Bob waits on B; the lock is released on A.
        #expect(await Self.waitUntil { !b.server.hub.locks.awaited.isEmpty })
        try await alice.releaseLock(channel: "doc", lockName: "L")
        let second = try #require(await waited.value)
        #expect(second > first)
        #expect(await aliceEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "bob")) != nil)
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockReleased)) != nil)
        #expect(try await alice.getLocks(channel: "doc") == [LockDetail(lockName: "L", owner: "bob", ttl: 10, fencingToken: second)])
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.12: an administrator's kick releases the user's locks cluster-wide at once, as a logout does: a waiter on the other node gets the lock")
    func adminKickReleasesClusterLocks() async throws {
        let (a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        try await alice.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await bob.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await alice.setLock(channel: "doc", lockName: "L", ttl: 300)   // a TTL the test would not wait out
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockSet)) != nil)
        let first = try await alice.acquireLock(channel: "doc", lockName: "L")
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "alice")) != nil)
        let waited = Task { await Self.acquire(bob, retry: true) }
        #expect(await Self.waitUntil { !b.server.hub.locks.awaited.isEmpty })
        #expect(a.server.hub.endSession(UserKey(appId: Harness.appId, userId: "alice"), code: .kickedOutByServer, reason: "test kick"))
        let acquired = await bobEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "bob"))
        #expect(acquired != nil, "the kicked user's lock was not released on the other node")
        guard acquired != nil else { waited.cancel(); await bob.logout(); return }
        let second = try #require(await waited.value.value)
        #expect(second > first)
        #expect(try await bob.getLocks(channel: "doc") == [LockDetail(lockName: "L", owner: "bob", ttl: 300, fencingToken: second)])
        await bob.logout()
    }

    @Test("§2.12: locks of a node that dies abruptly are released TTL after the survivors declare it dead; the next owner gets a larger token")
    func deadNodeLocksReleased() async throws {
        // A short lease (1.5 s: the death is declared within 1.6 s; node A renews in time on a
        // loaded machine), and a 2 s TTL.
        let (a, b) = try await Self.cluster(options: ClusterTests.options { $0.lease = .milliseconds(1_500); $0.leaseInterval = .milliseconds(100) })   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        try await alice.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await bob.setLock(channel: "doc", lockName: "L", ttl: 2)
        let held = try await bob.acquireLock(channel: "doc", lockName: "L")
        #expect(await aliceEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "bob")) != nil)
        // Node B is cut from the database at once: no more lease, no more writes (as after a
        // kill -9); bob's socket to B stays open, so nothing on B declares him offline.
        await b.server.configuration.backplane?.stop()
        await b.server.configuration.sharedServices?.stop()
        let died = ContinuousClock.now
        let declared = await eventually(within: .seconds(15)) { a.server.hub.deadNodes == ["b"] }
        #expect(declared)
        // Not released when the death is declared: the TTL (2 s) runs from there (seen here a
        // moment after the declaration: the window is the TTL less that moment).
        #expect(await aliceEvents.next(within: .seconds(1), where: Self.lock(.lockReleased)) == nil)
        #expect(await aliceEvents.first(within: .seconds(15), where: Self.lock(.lockReleased)) != nil)
        // The death was declared after `died`: a release TTL after it comes at least TTL after
        // `died`, however late this test saw either.
        #expect(ContinuousClock.now - died >= .seconds(2), "released \(ContinuousClock.now - died) after the node died")
        let next = try await alice.acquireLock(channel: "doc", lockName: "L")
        #expect(next > held)
        await alice.logout()
    }

    @Test("§2.12: `rtm serve --postgres` processes: the node of a lock's owner killed with SIGKILL: the lock is released TTL after the survivor declares it dead, and the next owner's token is larger")
    func killedNodeProcessReleasesLocks() async throws {
        let (_, nodes) = try await RTMProcess.clusterNodes(["n1", "n2"], extraArguments: ["--lease-seconds", "1.5", "--test-lock-ttl-min", "1"])   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: nodes[0].port)
        let (bob, _) = try await ClusterTests.client("bob", port: nodes[1].port)
        try await alice.subscribe("doc", options: SubscribeOptions(withLock: true))
        try await bob.setLock(channel: "doc", lockName: "L", ttl: 2)
        let held = try await bob.acquireLock(channel: "doc", lockName: "L")
        #expect(await aliceEvents.first(within: soon, where: Self.lock(.lockAcquired, owner: "bob")) != nil)
        await nodes[1].process.kill9()
        let killed = ContinuousClock.now
        // Declared dead after its lease ran out (1.5 s after its last renewal), then the TTL
        // (2 s) runs: nothing released within 2 s of the kill.
        #expect(await aliceEvents.next(within: .milliseconds(1_500), where: Self.lock(.lockReleased)) == nil)
        let owner = try await alice.getLocks(channel: "doc").first?.owner
        // Still bob's, unless this answer came so late (a loaded machine) that the TTL may have run.
        #expect(owner == "bob" || ContinuousClock.now - killed >= .seconds(2), "owner \(owner ?? "none") \(ContinuousClock.now - killed) after the kill")
        #expect(await aliceEvents.first(within: .seconds(15), where: Self.lock(.lockReleased)) != nil)
        #expect(ContinuousClock.now - killed >= .seconds(2))
        #expect(try await alice.acquireLock(channel: "doc", lockName: "L") > held)
        await alice.logout()
        await bob.logout()
    }

    /// Polls `condition` (bounded).
    private static func waitUntil(_ condition: () -> Bool) async -> Bool {
        await eventually(within: soon, condition)
    }
}
