import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// What a node knows that started after the cluster's traffic began, and channels that have
/// no message yet.
extension ClusterTests {
    /// A third node, "c", started now on the cluster's database.
    static func lateNode(_ database: PostgresTestServer) async throws -> Harness {
        let location = try PostgresLocation(url: database.url + "?sslmode=disable")
        var logger = Logger(label: "test.cluster")
        logger.logLevel = .warning
        return try await Harness.start {
            $0.backplane = PostgresChannelBackplane(location: location, node: "c", options: Self.options(), logger: logger)
        }
    }

    /// The position the SDK keeps for `channel` (the subscribe reply's, then each message's).
    static func position(_ client: RTMClient, _ channel: String) async throws -> ChannelPosition? {
        try await client.core.loop.submit { client.core.positions[channel] }.get()
    }

    @Test("M-2: a subscribe to a channel with no message yet answers the cluster's epoch: its messages carry it, and a subscriber resuming from that position on another node is replayed what it missed with no gap")
    func firstSubscribeEpoch() async throws {
        let (_, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (carol, carolEvents, proxies) = try await Self.clientMovingFromAToB("carol", a: a, b: b)
        try await carol.subscribe("quiet")
        let subscribed = try #require(try await Self.position(carol, "quiet"))
        #expect(subscribed.seq == 0)
        // Node A becomes unreachable for carol before the channel's first message.
        await proxies.cutA(carolEvents)
        let (alice, _) = try await ClusterTests.client("alice", port: b.port)
        for i in 1...3 { _ = try await alice.publish(channel: "quiet", message: "m\(i)") }
        proxies.openB()
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "m3" } != nil)
        let seen = await Self.received(carolEvents, channel: "quiet")
        #expect(seen.compactMap(\.text) == ["m1", "m2", "m3"])
        #expect(try await Self.position(carol, "quiet") == ChannelPosition(epoch: subscribed.epoch, seq: 3))
        #expect(await carolEvents.matching { if case .gap = $0 { true } else { false } }.isEmpty)
        await carol.logout()
        await alice.logout()
        await proxies.stop()
    }

    @Test("M-2: a node started after a channel's messages answers a subscribe with the channel's cluster epoch and number")
    func positionsOfANodeStartedLater() async throws {
        let (database, a, _) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)
        try await alice.subscribe("room")
        for i in 1...3 { _ = try await alice.publish(channel: "room", message: "m\(i)") }
        #expect(await aliceEvents.first(within: soon) { $0.messageEvent?.text == "m3" } != nil)
        let published = try #require(try await Self.position(alice, "room"))
        #expect(published.seq == 3)
        let c = try await Self.lateNode(database)
        let (dave, _) = try await ClusterTests.client("dave", port: c.port)
        try await dave.subscribe("room")
        #expect(try await Self.position(dave, "room") == published)
        await dave.logout()
        await alice.logout()
        await c.stop()
    }

    @Test("M-3: a node started after a message was committed recognises its resend (it reads the publishers' ids of the resend window back at its start): the first number, nothing stored, delivered once")
    func resendThroughANodeStartedLater() async throws {
        let (database, a, b) = try await Self.cluster()   // stopped by the .realTime trait's scope
        let (onB, onBEvents) = try await ClusterTests.client("sub-b", port: b.port)
        try await onB.subscribe("room")
        // The first attempt, committed through A (its ack lost, as far as alice knows).
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let committed = try await Self.publishOnce(through: a)
        #expect(committed.seqs == [1])
        #expect(await onBEvents.first(within: soon) { $0.messageEvent?.text == "once" } != nil)
        // Node C starts; alice's resend goes through it.
        let c = try await Self.lateNode(database)
        let (onC, onCEvents) = try await ClusterTests.client("sub-c", port: c.port)
        try await onC.subscribe("room")
        let again = try await Self.publishOnce(through: c)
        #expect(again.seqs == [1] && again.epoch == nil)
        let marker = try await alice.publish(channel: "room", message: "marker")
        #expect(marker == 2)
        _ = await onBEvents.first(within: soon) { $0.messageEvent?.text == "marker" }
        _ = await onCEvents.first(within: soon) { $0.messageEvent?.text == "marker" }
        #expect(await Self.received(onBEvents).compactMap(\.text) == ["once", "marker"])
        #expect(await Self.received(onCEvents).compactMap(\.text) == ["marker"])
        for client in [onB, onC, alice] { await client.logout() }
        await c.stop()
    }
}
