import Foundation
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Storage end to end (AGORA_REFERENCE §2.11): compare-and-set, events, persistence.
@Suite(.realTime, .serialized)
struct StorageTests {
    static func storage(_ kind: StorageEventKind) -> @Sendable (RTMEvent) -> Bool {
        { if case .storage(let e) = $0 { e.kind == kind } else { false } }
    }

    @Test("§2.11 CAS: two writers with the same majorRevision → exactly one wins, the other gets storageOutdatedRevision")
    func concurrentCompareAndSet() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        let initial = try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "title", value: "draft")]))
        #expect(initial.majorRevision == 1)
        #expect(initial["title"]?.revision == 1)
        for round in 0..<20 {
            let read = try await alice.getChannelMetadata("doc")
            async let a = Self.outcome { try await alice.setChannelMetadata("doc", Metadata(majorRevision: read.majorRevision, items: [MetadataItem(key: "title", value: "alice \(round)")])) }
            async let b = Self.outcome { try await bob.setChannelMetadata("doc", Metadata(majorRevision: read.majorRevision, items: [MetadataItem(key: "title", value: "bob \(round)")])) }
            let results = await [a, b]
            #expect(results.filter { $0 == nil }.count == 1, "round \(round): exactly one writer wins")
            #expect(results.compactMap { $0 }.first == .storageOutdatedRevision)
            let after = try await bob.getChannelMetadata("doc")
            #expect(after.majorRevision == read.majorRevision + 1)
        }
        // Item revision CAS, create-only (revision 0), update of a missing key, duplicate keys.
        let current = try await alice.getChannelMetadata("doc")
        let title = try #require(current["title"])
        #expect(await Self.outcome { try await bob.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "title", value: "x", revision: title.revision + 5)])) } == .storageOutdatedRevision)
        #expect(await Self.outcome { try await bob.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "title", value: "x", revision: 0)])) } == .storageOutdatedRevision)
        #expect(await Self.outcome { try await bob.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "owner", value: "bob", revision: 0)])) } == nil)
        #expect(await Self.outcome { try await bob.updateChannelMetadata("doc", Metadata(items: [MetadataItem(key: "missing", value: "x")])) } == .storageInvalidMetadataItem)
        #expect(await Self.outcome { try await bob.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "k", value: "1"), MetadataItem(key: "k", value: "2")])) } == .storageDuplicateKey)
        #expect(await Self.outcome { try await bob.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: String(repeating: "k", count: 33), value: "1")])) } == .storageKeyLengthOverflow)
        #expect(await Self.outcome { try await bob.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "big", value: String(repeating: "v", count: 16 * 1024 + 1))])) } == .storageValueLengthOverflow)
        let unchanged = try await alice.getChannelMetadata("doc")
        #expect(unchanged.items.map(\.key) == ["owner", "title"])
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.11 events: a subscriber withMetadata gets a snapshot then the whole set after each change; recordTs/recordUserId; user metadata watchers")
    func storageEvents() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await alice.setChannelMetadata("room", Metadata(items: [MetadataItem(key: "topic", value: "swift")]))
        try await bob.subscribe("room", options: SubscribeOptions(withMetadata: true))
        let snapshot = await bobEvents.first(within: soon, where: Self.storage(.snapshot))
        guard case .storage(let snap)? = snapshot else { Issue.record("no snapshot"); return }
        #expect(snap.target == "room" && snap.storageType == .channel && snap.metadata["topic"]?.value == "swift")
        let written = try await alice.updateChannelMetadata("room", Metadata(items: [MetadataItem(key: "topic", value: "nio")]),
                                                           options: MetadataOptions(recordTs: true, recordUserId: true))
        #expect(written["topic"]?.authorUserId == "alice")
        #expect((written["topic"]?.updateTs ?? 0) > 0)
        let update = await bobEvents.first(within: soon, where: Self.storage(.update))
        guard case .storage(let event)? = update else { Issue.record("no update event"); return }
        #expect(event.metadata == written)
        try await alice.removeChannelMetadata("room", Metadata(items: [MetadataItem(key: "topic")]))
        #expect(await bobEvents.first(within: soon, where: Self.storage(.remove)) != nil)

        // A subscriber without withMetadata gets none.
        let (carol, carolEvents) = try await Harness.client("carol", port: harness.port)
        try await carol.subscribe("room")
        try await alice.setChannelMetadata("room", Metadata(items: [MetadataItem(key: "a", value: "1")]))
        #expect(await bobEvents.first(within: soon, where: Self.storage(.set)) != nil)
        #expect(await carolEvents.matching { if case .storage = $0 { true } else { false } }.isEmpty)

        // User metadata: bob watches alice's.
        let before = try await bob.subscribeUserMetadata(userId: "alice")
        #expect(before.items.isEmpty)
        try await alice.setUserMetadata(Metadata(items: [MetadataItem(key: "status", value: "online")]))
        let userEvent = await bobEvents.first(within: soon) { if case .storage(let e) = $0 { e.storageType == .user && e.kind == .set } else { false } }
        guard case .storage(let ue)? = userEvent else { Issue.record("no user metadata event"); return }
        #expect(ue.target == "alice" && ue.metadata["status"]?.value == "online")
        #expect(try await carol.getUserMetadata(userId: "alice")["status"]?.value == "online")
        await alice.logout()
        await bob.logout()
        await carol.logout()
    }

    @Test("§2.11: a write guarded by a lock needs the lock's holder (storageLockNotAcquired otherwise)")
    func lockGuardedWrite() async throws {
        let harness = try await Harness.start { $0.lockTTLRange = 1...300 }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.setLock(channel: "doc", lockName: "editor", ttl: 10)
        try await alice.acquireLock(channel: "doc", lockName: "editor")
        let item = Metadata(items: [MetadataItem(key: "body", value: "text")])
        #expect(await Self.outcome { try await bob.setChannelMetadata("doc", item, lock: "editor") } == .storageLockNotAcquired)
        #expect(await Self.outcome { try await alice.setChannelMetadata("doc", item, lock: "editor") } == nil)
        await alice.logout()
        await bob.logout()
    }

    @Test("§2.11: metadata survives a server restart (embedded store), revisions included")
    func survivesRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-storage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try await Harness.start { $0.dataDirectory = directory }
        let (alice, _) = try await Harness.client("alice", port: first.port)
        try await alice.setChannelMetadata("doc", Metadata(items: [MetadataItem(key: "title", value: "kept")]))
        let written = try await alice.setUserMetadata(Metadata(items: [MetadataItem(key: "lang", value: "swift")]), options: MetadataOptions(recordUserId: true))
        let channelBefore = try await alice.getChannelMetadata("doc")
        await alice.logout()
        await first.stop()

        let second = try await Harness.start { $0.dataDirectory = directory }
        let (bob, _) = try await Harness.client("bob", port: second.port)
        #expect(try await bob.getChannelMetadata("doc") == channelBefore)
        #expect(try await bob.getUserMetadata(userId: "alice") == written)
        // CAS continues from the stored revision.
        let next = try await bob.setChannelMetadata("doc", Metadata(majorRevision: channelBefore.majorRevision, items: [MetadataItem(key: "title", value: "v2")]))
        #expect(next.majorRevision == channelBefore.majorRevision + 1)
        await bob.logout()
    }

    /// nil on success, else the error code.
    static func outcome(_ body: () async throws -> Metadata) async -> RTMErrorCode? {
        do { _ = try await body(); return nil } catch { return (error as? RTMError)?.code ?? .invalidFrame }
    }
}

/// The classic user/channel attributes (§1.6) on the same store.
@Suite(.realTime, .serialized)
struct ClassicAttributeTests {
    @Test("§1.6: classic attributes are the metadata: set replaces, addOrUpdate merges, delete ignores missing keys; notify reaches every member")
    func classicAttributes() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await alice.setLocalUserAttributes(["a": "1", "b": "2"])
        try await alice.setLocalUserAttributes(["c": "3"])
        #expect(try await bob.getUserAttributes(userId: "alice") == ["c": "3"])
        try await alice.addOrUpdateLocalUserAttributes(["d": "4"])
        try await alice.deleteLocalUserAttributes(keys: ["c", "nope"])
        #expect(try await bob.getUserAttributes(userId: "alice") == ["d": "4"])
        #expect(try await bob.getUserMetadata(userId: "alice")["d"]?.value == "4")   // same store
        try await alice.clearLocalUserAttributes()
        #expect(try await bob.getUserAttributes(userId: "alice").isEmpty)

        try await bob.subscribe("room")   // classic member: no withMetadata
        try await alice.setChannelAttributes("room", ["topic": "swift"])   // no notification
        try await alice.addOrUpdateChannelAttributes("room", ["mood": "calm"], notifyChannelMembers: true)
        let event = await bobEvents.first(within: soon) { if case .storage = $0 { true } else { false } }
        guard case .storage(let update)? = event else { Issue.record("no notification"); return }
        #expect(update.metadata.items.map(\.key) == ["mood", "topic"])
        #expect(await bobEvents.matching { if case .storage = $0 { true } else { false } }.count == 1)
        let attributes = try await bob.getChannelAttributes("room")
        #expect(attributes.map(\.key) == ["mood", "topic"])
        #expect(attributes.allSatisfy { $0.lastUpdateUserId == "alice" && $0.lastUpdateTs > 0 })
        await alice.logout()
        await bob.logout()
    }
}
