import Foundation
import Logging
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Stream channels across nodes over a real PostgreSQL, two real servers and
/// real SDK clients. Topic messages cross nodes through the backplane's log.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ClusterStreamTests {
    /// The texts of the topic messages `events` received from `publisher`, in arrival order.
    static func topicTexts(_ events: AsyncRecorder<RTMEvent>, from publisher: String) async -> [String] {
        await events.matching { $0.messageEvent.map { $0.channelType == .stream && $0.topic == "moves" && $0.publisher == publisher } ?? false }
            .compactMap { $0.messageEvent?.text }
    }

    /// Publishes `count` topic messages, each after the previous one's ack.
    static func publish(_ channel: RTMStreamChannel, prefix: String, count: Int) async throws {
        for index in 0..<count { try await channel.publishTopicMessage(topic: "moves", message: "\(prefix)\(index)") }
    }

    @Test("§2.9: topic messages of publishers on both nodes reach subscribers on both, each once, in each publisher's order, through their publisher filters")
    func topicMessagesAcrossNodes() async throws {
        let (_, a, b) = try await ClusterTests.cluster()   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)   // publisher on A
        let (carol, _) = try await ClusterTests.client("carol", port: b.port)   // publisher on B
        let (erin, erinEvents) = try await ClusterTests.client("erin", port: a.port)   // everyone, on A
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)   // everyone, on B
        let (dave, daveEvents) = try await ClusterTests.client("dave", port: b.port)   // carol only, on B
        let (fred, fredEvents) = try await ClusterTests.client("fred", port: b.port)   // alice only, on B
        var channels: [String: RTMStreamChannel] = [:]
        for (name, client) in [("alice", alice), ("carol", carol), ("erin", erin), ("bob", bob), ("dave", dave), ("fred", fred)] {
            let game = try client.createStreamChannel("game")
            try await game.join()   // joins on both nodes
            channels[name] = game
        }
        let joined = channels
        try await joined["alice"]!.joinTopic("moves")
        try await joined["carol"]!.joinTopic("moves")
        try await joined["alice"]!.subscribeTopic("moves")   // the publisher's own messages never come back
        try await joined["erin"]!.subscribeTopic("moves")
        try await joined["bob"]!.subscribeTopic("moves")
        try await joined["dave"]!.subscribeTopic("moves", users: ["carol"])
        try await joined["fred"]!.subscribeTopic("moves", users: ["alice"])

        // Both publishers at once: their messages interleave in the topic's log channel.
        async let fromAlice: Void = Self.publish(joined["alice"]!, prefix: "a", count: 40)
        async let fromCarol: Void = Self.publish(joined["carol"]!, prefix: "c", count: 40)
        _ = try await (fromAlice, fromCarol)
        // A burst without waiting for each ack: batched by the outbox, still in order.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await Self.publish(joined["alice"]!, prefix: "x", count: 30) }
            group.addTask { try await joined["carol"]!.publishTopicMessage(topic: "moves", message: "c-last") }
            try await group.waitForAll()
        }
        try await joined["alice"]!.publishTopicMessage(topic: "moves", message: "a-last")
        let aliceAll = (0..<40).map { "a\($0)" } + (0..<30).map { "x\($0)" } + ["a-last"]
        let carolAll = (0..<40).map { "c\($0)" } + ["c-last"]
        for events in [erinEvents, bobEvents, fredEvents] {
            #expect(await events.first(within: soon) { $0.messageEvent?.text == "a-last" } != nil)
        }
        for events in [erinEvents, bobEvents, daveEvents] {
            #expect(await events.first(within: soon) { $0.messageEvent?.text == "c-last" } != nil)
        }
        for events in [erinEvents, bobEvents] {   // everyone's, once, each publisher in order
            #expect(await Self.topicTexts(events, from: "alice") == aliceAll)
            #expect(await Self.topicTexts(events, from: "carol") == carolAll)
        }
        #expect(await Self.topicTexts(daveEvents, from: "alice").isEmpty)   // filtered: carol only
        #expect(await Self.topicTexts(daveEvents, from: "carol") == carolAll)
        #expect(await Self.topicTexts(fredEvents, from: "alice") == aliceAll)   // filtered: alice only
        #expect(await Self.topicTexts(fredEvents, from: "carol").isEmpty)
        #expect(await Self.topicTexts(aliceEvents, from: "alice").isEmpty)
        #expect(await Self.topicTexts(aliceEvents, from: "carol") == carolAll)
        let first = await bobEvents.first(within: soon) { $0.messageEvent?.text == "a0" }?.messageEvent
        #expect(first?.channelName == "game")
        #expect(first?.seq == nil)

        // Not joined to the topic: refused on the publisher's node, nothing crosses.
        await StreamTests.expectError(.channelTopicNotJoined) { try await joined["erin"]!.publishTopicMessage(topic: "moves", message: "nope") }
        // A channel's message channel of the same name is untouched by its topics.
        try await bob.subscribe("game")
        _ = try await alice.publish(channel: "game", message: "chat")
        let chat = await bobEvents.first(within: soon) { $0.messageEvent?.text == "chat" }?.messageEvent
        #expect(chat?.channelType == .message && chat?.seq == 1)
        #expect(await bobEvents.matching { $0.messageEvent?.text == "nope" }.isEmpty)
        for client in [alice, carol, erin, bob, dave, fred] { await client.logout() }
    }

    static func presence(_ kind: PresenceEventKind, _ user: String) -> @Sendable (RTMEvent) -> Bool {
        { $0.presenceEvent.map { $0.kind == kind && $0.userId == user && $0.channelType == .stream && $0.channelName == "game" } ?? false }
    }

    static func topicEvent(_ kind: TopicEventKind, _ user: String, meta: String? = nil) -> @Sendable (RTMEvent) -> Bool {
        { event in
            guard case .topic(let e) = event, e.kind == kind, e.userId == user, e.channelName == "game" else { return false }
            return meta == nil || e.topics.first?.publishers.first?.meta == meta
        }
    }

    /// Waits until `node` mirrors `user` as a member of stream channel "game" on another node.
    static func mirrored(_ user: String, on node: Harness) async -> Bool {
        await StreamTests.eventually {
            node.server.hub.streams.remoteMembers(of: ChannelKey(appId: Harness.appId, name: "game"))[user] != nil
        }
    }

    @Test("§2.9: stream presence and topic publishers are cluster-wide: snapshots list every node's members, remote joins, topic changes and leaves are events, a node started later learns the members, a dead node's members time out, a stopping node's members leave")
    func membershipAcrossNodes() async throws {
        let (database, a, b) = try await ClusterTests.cluster()   // stopped by the .realTime trait's scope
        let (carol, carolEvents) = try await ClusterTests.client("carol", port: b.port)
        let carolGame = try carol.createStreamChannel("game")
        try await carolGame.join()
        #expect(await Self.mirrored("carol", on: a))
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let aliceGame = try alice.createStreamChannel("game")
        #expect(try await aliceGame.join() == ["alice", "carol"])   // carol is on B
        #expect(await carolEvents.first(within: soon, where: Self.presence(.remoteJoin, "alice")) != nil)
        try await aliceGame.joinTopic("moves", options: JoinTopicOptions(meta: "white"))
        #expect(await carolEvents.first(within: soon, where: Self.topicEvent(.remoteJoinTopic, "alice", meta: "white")) != nil)

        // A later join on B: alice (on A) and her topic are in the snapshots.
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        let bobGame = try bob.createStreamChannel("game")
        #expect(try await bobGame.join() == ["alice", "bob", "carol"])
        let snapshot = await bobEvents.first(within: soon) { if case .topic(let e) = $0 { e.kind == .snapshot } else { false } }
        guard case .topic(let topics)? = snapshot else { Issue.record("no topic snapshot"); return }
        #expect(topics.topics == [TopicInfo(topic: "moves", publishers: [TopicPublisher(userId: "alice", meta: "white")])])

        // A third node started now learns the members already there when its first member joins.
        var logger = Logger(label: "test.cluster")
        logger.logLevel = .warning
        let location = try PostgresLocation(url: database.url + "?sslmode=disable")
        let c = try await Harness.start {
            $0.backplane = PostgresChannelBackplane(location: location, node: "c", options: ClusterTests.options(), logger: logger)
        }
        let (dave, daveEvents) = try await ClusterTests.client("dave", port: c.port)
        let daveGame = try dave.createStreamChannel("game")
        _ = try await daveGame.join()
        for user in ["alice", "bob", "carol"] {
            #expect(await daveEvents.first(within: soon, where: Self.presence(.remoteJoin, user)) != nil, "dave learns \(user)")
        }
        #expect(await daveEvents.first(within: soon, where: Self.topicEvent(.remoteJoinTopic, "alice", meta: "white")) != nil)
        #expect(await bobEvents.first(within: soon, where: Self.presence(.remoteJoin, "dave")) != nil)

        // Topic leave and channel leave on A reach B.
        try await aliceGame.leaveTopic("moves")
        #expect(await bobEvents.first(within: soon, where: Self.topicEvent(.remoteLeaveTopic, "alice")) != nil)
        await aliceGame.leave()
        #expect(await bobEvents.first(within: soon, where: Self.presence(.remoteLeave, "alice")) != nil)
        #expect(await daveEvents.first(within: soon, where: Self.presence(.remoteLeave, "alice")) != nil)

        // Node c declared dead (the event its lease's expiry raises): dave times out on B.
        b.server.hub.handle(.nodeDied(node: "c"))
        #expect(await bobEvents.first(within: soon, where: Self.presence(.remoteTimeout, "dave")) != nil)
        #expect(await carolEvents.first(within: soon, where: Self.presence(.remoteTimeout, "dave")) != nil)
        // A node that shuts down announces its members' leaves before it stops.
        let (erin, _) = try await ClusterTests.client("erin", port: a.port)
        _ = try await erin.createStreamChannel("game").join()
        #expect(await bobEvents.first(within: soon, where: Self.presence(.remoteJoin, "erin")) != nil)
        await a.stop()
        #expect(await bobEvents.first(within: soon, where: Self.presence(.remoteLeave, "erin")) != nil)
        for client in [alice, bob, carol, dave, erin] { await client.logout() }
        await c.stop()
    }

    @Test("Stream membership changes made while the database was down reach the other nodes when it is back (a sync of the node's members)")
    func membershipAfterDatabaseOutage() async throws {
        // Leases long enough that node A is never declared dead around the outage, even on a slow
        // build (the thread sanitizer's): its members leave by A's sync, not by a timeout on B.
        let options = ClusterTests.options { $0.leaseInterval = .milliseconds(200); $0.lease = .seconds(4) }
        let (database, a, b) = try await ClusterTests.cluster(options: options)   // stopped by the .realTime trait's scope
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        try await bob.createStreamChannel("game").join()
        let (carol, _) = try await ClusterTests.client("carol", port: a.port)
        let carolGame = try carol.createStreamChannel("game")
        try await carolGame.join()
        #expect(await bobEvents.first(within: soon, where: Self.presence(.remoteJoin, "carol")) != nil)
        let (erin, _) = try await ClusterTests.client("erin", port: a.port)

        try await database.stop()
        #expect(await StreamTests.eventually { !a.server.hub.cluster.databaseUp })
        await carolGame.leave()   // announced into the void
        let erinGame = try erin.createStreamChannel("game")
        try await erinGame.join()
        try await erinGame.joinTopic("moves", options: JoinTopicOptions(meta: "m"))
        #expect(await bobEvents.matching(Self.presence(.remoteLeave, "carol")).isEmpty)

        try await database.start()
        #expect(await bobEvents.first(within: .seconds(15), where: Self.presence(.remoteLeave, "carol")) != nil)
        #expect(await bobEvents.first(within: soon, where: Self.presence(.remoteJoin, "erin")) != nil)
        #expect(await bobEvents.first(within: soon, where: Self.topicEvent(.remoteJoinTopic, "erin", meta: "m")) != nil)
        for client in [bob, carol, erin] { await client.logout() }
    }

    @Test("The reserved log channel names of stream channels cannot be a user channel's and parse back")
    func topicLogChannelNames() {
        let name = Hub.topicLogChannel("game", topic: "moves")
        #expect(name == "/stream/game/moves")
        #expect(Limits().nameProblem(name, kind: "channel") != nil)   // '/' is outside the name set
        #expect(Hub.streamTarget(ofLogChannel: name) == .topic(channel: "game", topic: "moves"))
        #expect(Hub.streamTarget(ofLogChannel: "/stream/game") == .members(channel: "game"))
        #expect(Hub.streamTarget(ofLogChannel: "/stream/") == .nodes)
        #expect(Hub.streamTarget(ofLogChannel: "game") == nil)
    }
}
