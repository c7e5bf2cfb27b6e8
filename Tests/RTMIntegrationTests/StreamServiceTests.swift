import Foundation
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// The join options `withMetadata` and `withLock` of a stream channel (AGORA_REFERENCE §2.9
/// `AgoraRtmJoinChannelFeature`): the channel's storage and lock snapshots and events, as a
/// message-channel subscriber with those features gets them.
@Suite(.realTime, .serialized)
struct StreamServiceTests {
    static func storage(_ kind: StorageEventKind) -> @Sendable (RTMEvent) -> Bool {
        { if case .storage(let e) = $0 { e.kind == kind && e.target == "game" } else { false } }
    }

    static func lock(_ kind: LockEventKind) -> @Sendable (RTMEvent) -> Bool {
        { if case .lock(let e) = $0 { e.kind == kind && e.channelName == "game" } else { false } }
    }

    @Test("§2.9: a stream join withMetadata / withLock gets the channel's storage and lock snapshots, then their events; a plain join gets neither, and no message-channel traffic")
    func joinWithMetadataAndLock() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let (carol, carolEvents) = try await Harness.client("carol", port: harness.port)
        _ = try await alice.setChannelMetadata("game", Metadata(items: [MetadataItem(key: "title", value: "round 1")]))
        try await alice.setLock(channel: "game", lockName: "board", ttl: 10)
        _ = try await alice.acquireLock(channel: "game", lockName: "board")

        let bobGame = try bob.createStreamChannel("game")
        try await bobGame.join(JoinChannelOptions(withMetadata: true, withLock: true))
        let storageSnapshot = await bobEvents.first(within: soon, where: Self.storage(.snapshot))
        guard case .storage(let storage)? = storageSnapshot else { Issue.record("no storage snapshot"); return }
        #expect(storage.metadata["title"]?.value == "round 1")
        let lockSnapshot = await bobEvents.first(within: soon, where: Self.lock(.snapshot))
        guard case .lock(let locks)? = lockSnapshot else { Issue.record("no lock snapshot"); return }
        #expect(locks.locks.map(\.lockName) == ["board"])
        #expect(locks.locks.first?.owner == "alice")
        let carolGame = try carol.createStreamChannel("game")
        try await carolGame.join()

        // Events after the join: a metadata write, a lock release, a lock removal.
        _ = try await alice.updateChannelMetadata("game", Metadata(items: [MetadataItem(key: "title", value: "round 2")]))
        let update = await bobEvents.first(within: soon) { event in
            if case .storage(let e) = event { e.target == "game" && e.metadata["title"]?.value == "round 2" } else { false }
        }
        #expect(update != nil)
        try await alice.releaseLock(channel: "game", lockName: "board")
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockReleased)) != nil)
        try await alice.removeLock(channel: "game", lockName: "board")
        #expect(await bobEvents.first(within: soon, where: Self.lock(.lockRemoved)) != nil)

        // The message channel of the same name is not the stream channel: its messages stay out.
        _ = try await alice.publish(channel: "game", message: "chat")
        try await carol.subscribe("marker")
        _ = try await alice.publish(channel: "marker", message: "done")
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "done" } != nil)
        #expect(await carolEvents.matching { if case .storage = $0 { true } else if case .lock = $0 { true } else { false } }.isEmpty)
        #expect(await bobEvents.matching { $0.messageEvent?.text == "chat" }.isEmpty)
        #expect(await carolEvents.matching { $0.messageEvent?.text == "chat" }.isEmpty)
        for client in [alice, bob, carol] { await client.logout() }
    }
}
