import Foundation
import NIOCore
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// A node follows only the channels it has subscribers or replay buffers for
/// (`ChannelInterest`, `ChannelLogFollower.follow`): two real nodes on a real PostgreSQL.
extension ClusterTests {
    private static let room = ChannelKey(appId: Harness.appId, name: "room")

    private static func follows(_ node: Harness, _ key: ChannelKey = room) -> Bool {
        node.server.hub.read { $0.interest.isFollowed(key) }
    }

    private static func holds(_ node: Harness, _ key: ChannelKey = room) -> Bool {
        node.server.hub.read { $0.channels[key] != nil }
    }

    /// Waits (at most 10 s) until `condition` holds.
    private static func eventually(_ condition: () -> Bool) async throws -> Bool {
        await RTMTestSupport.eventually(within: .seconds(10), condition)
    }

    @Test("M-2 across nodes, interest: a node is sent a channel's messages only while it has subscribers (or the replay window after them): a first subscriber gets the cluster's position and everything after it once; a position older than the node's start is replayed from the log; unused, the channel stops")
    func followsOnlyChannelsInUse() async throws {
        let (_, a, b) = try await Self.cluster(configure: { _, _, _, configuration in configuration.channelReplayWindow = .milliseconds(600) })   // stopped by the .realTime trait's scope
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        var acknowledged: [UInt64] = []
        for i in 1...5 { acknowledged.append(try await alice.publish(channel: "room", message: "early-\(i)")) }
        #expect(acknowledged == [1, 2, 3, 4, 5])
        // Nobody subscribes: neither node, the publisher's included, is sent the messages.
        #expect(!Self.follows(a) && !Self.follows(b))
        #expect(!Self.holds(a) && !Self.holds(b))

        let (sub, subEvents) = try await ClusterTests.client("sub", port: b.port)
        _ = try await sub.subscribe("room")
        #expect(Self.follows(b) && !Self.follows(a))
        let position = b.server.hub.channelPosition(appId: Harness.appId, channel: "room")
        #expect(position.seq == 5)
        for i in 1...3 { _ = try await alice.publish(channel: "room", message: "late-\(i)") }
        #expect(await subEvents.first(within: soon) { $0.messageEvent?.text == "late-3" } != nil)
        let seen = await Self.received(subEvents)
        #expect(seen.map(\.seq) == [6, 7, 8])   // from the cluster's position on, once
        // What each node says of it: b follows one channel and was delivered its 3 messages;
        // a, the publisher's node, was delivered none.
        let (onA, onB) = (try await MetricsTests.scrape(a.port), try await MetricsTests.scrape(b.port))
        #expect(onB["rtm_cluster_channels_followed"] == 1 && onA["rtm_cluster_channels_followed"] == 0)
        #expect(onB["rtm_cluster_messages_applied_total"] == 3, "b: \(onB["rtm_cluster_messages_applied_total"])")
        #expect(onA["rtm_cluster_messages_applied_total"] == 0)

        // A channel node b never followed, resumed from number 1: the start brings 2…4 from the log.
        for i in 1...4 { _ = try await alice.publish(channel: "lobby", message: "lobby-\(i)") }
        let lobby = ChannelKey(appId: Harness.appId, name: "lobby")
        let epoch = position.epoch
        let loop = b.server.hub.fanouts[0].eventLoop
        let following = try #require(b.server.hub.follow(["lobby"], appId: Harness.appId,
                                                          positions: ["lobby": ChannelPosition(epoch: epoch, seq: 1)], on: loop))
        #expect(try await following.get())
        let replay = b.server.hub.replay(appId: Harness.appId, channel: "lobby", after: ChannelPosition(epoch: epoch, seq: 1))
        #expect(replay.lost == nil && replay.messages.count == 3)
        #expect(Self.follows(b, lobby))

        // The subscriber leaves: after the replay window without one, b stops following.
        try await sub.unsubscribe("room")
        #expect(try await Self.eventually { !Self.follows(b) && !Self.follows(b, lobby) })
        #expect(try await MetricsTests.scrape(b.port)["rtm_cluster_channels_followed"] == 0)
        for i in 1...2 { _ = try await alice.publish(channel: "room", message: "after-\(i)") }
        // A window in which nothing may happen (the rule is a negative: b keeps no copy).
        try await Task.sleep(for: .milliseconds(300))
        #expect(!Self.holds(b))
        // Subscribed again: the position is the cluster's now, nothing missed in between repeats.
        _ = try await sub.subscribe("room")
        #expect(b.server.hub.channelPosition(appId: Harness.appId, channel: "room").seq == 10)
        _ = try await alice.publish(channel: "room", message: "again")
        #expect(await subEvents.first(within: soon) { $0.messageEvent?.text == "again" } != nil)
        #expect(await Self.received(subEvents).map(\.seq) == [6, 7, 8, 11])
        for client in [alice, sub] { await client.logout() }
    }
}
