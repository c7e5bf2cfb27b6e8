import Foundation
import NIOCore
import NIOPosix
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Stream channels end to end (SPEC K-3, K-4, H-3; AGORA_REFERENCE §2.9).
@Suite(.realTime, .serialized)
struct StreamTests {
    static func streamLink(_ channel: String, to state: LinkState) -> @Sendable (RTMEvent) -> Bool {
        { $0.link.map { $0.serviceType == .stream && $0.affectedChannels == [channel] && $0.currentState == state } ?? false }
    }

    /// Waits (polling every 5 ms, up to 5 s) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async -> Bool {
        await RTMTestSupport.eventually(within: soon, every: .milliseconds(5), condition)
    }

    @Test("K-3/K-4: no join before login; three joined stream channels = three STREAM connections (not PCU); leave closes one; logout closes all")
    func oneConnectionPerStreamChannel() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, login: false)
        let a = try alice.createStreamChannel("a")
        do {
            try await a.join()
            Issue.record("joined a stream channel before login")
        } catch {
            #expect(error.code == .notLogin)
        }
        #expect(harness.server.connectionCount == 0)
        try await alice.login(token: Harness.token("alice"))
        let b = try alice.createStreamChannel("b")
        let c = try alice.createStreamChannel("c")
        for channel in [a, b, c] { try await channel.join() }
        #expect(await Self.eventually { harness.server.connectionCounters.stream == 3 })
        #expect(harness.server.connectionCounters.message == 1)
        #expect(harness.server.connectionCounters.peakMessage == 1)
        #expect(harness.server.connectionCount == 4)
        #expect(await events.first(within: soon, where: Self.streamLink("b", to: .connected))?.link?.operation == .join)

        await b.leave()
        #expect(await b.linkState == .idle)
        #expect(await Self.eventually { harness.server.connectionCounters.stream == 2 && harness.server.connectionCount == 3 })
        #expect(await events.first(within: soon, where: Self.streamLink("b", to: .idle))?.link?.operation == .leave)

        await alice.logout()
        #expect(await Self.eventually { harness.server.connectionCount == 0 })
        #expect(harness.server.connectionCounters == { var c = ConnectionCounters(); c.peakMessage = 1; return c }())
        #expect(await a.linkState == .idle)
        #expect(await c.linkState == .idle)
        #expect(await events.first(within: soon) { ($0.link.map { $0.affectedChannels == ["c"] && $0.currentState == .idle && $0.operation == .logout }) ?? false } != nil)
    }

    @Test("K-3/P-2: when a lost session's grace window runs out, its STREAM connections are closed (1000, the reason says why)")
    func graceExpiryEndsStreams() async throws {
        let harness = try await Harness.start()
        let login = HardeningTests.loginFrame("gone", heartbeat: 0.1, presenceTimeout: 0.1)
        let message = try await RawPeer.connect(port: harness.port)
        var hello = ByteBuffer(string: RawPeer.upgradeRequest())
        hello.writeImmutableBuffer(login)
        try await message.write(hello)
        #expect(await Self.eventually { harness.server.connectionCounters.message == 1 })
        let stream = try await RawPeer.connect(port: harness.port)
        var join = ByteBuffer(string: RawPeer.upgradeRequest())
        join.writeImmutableBuffer(RawPeer.text(#"{"type":"join","id":1,"appId":"\#(Harness.appId)","userId":"gone","token":"\#(Harness.token("gone"))","channel":"s"}"#))
        try await stream.write(join)
        #expect(await Self.eventually { harness.server.connectionCounters.stream == 1 })
        // The STREAM connection stays alive (pings); its MESSAGE connection is cut.
        let pinging = stream.keepWriting([RawPeer.text(#"{"type":"ping"}"#)], every: .milliseconds(100))
        await message.close()
        let frames = await stream.framesUntilClose(within: soon)
        pinging.cancel()
        #expect(frames.last?.closeCode == 1000, "\(frames.map(\.text))")
        #expect(frames.last?.text.contains("timed out") == true)
        #expect(harness.server.connectionCounters.stream == 0)
    }

    @Test("K-2/K-3: GET /metrics reports MESSAGE connections (and their PCU peak) apart from STREAM connections; the server caps stream channels per user")
    func metricsAndStreamCap() async throws {
        let harness = try await Harness.start { $0.limits.maxStreamChannelsPerClient = 2 }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        for name in ["a", "b"] { try await alice.createStreamChannel(name).join() }
        await Self.expectError(.channelJoinFailed) { try await alice.createStreamChannel("c").join() }
        #expect(await Self.eventually { harness.server.connectionCounters.stream == 2 })
        let metrics = try MetricsTests.Scrape(try await Self.httpGet("/metrics", port: harness.port))
        #expect(metrics["rtm_connections{kind=\"message\"}"] == 1)
        #expect(metrics["rtm_pcu"] == 1)
        #expect(metrics["rtm_connections{kind=\"stream\"}"] == 2)
        await alice.logout()
    }

    /// A plain HTTP GET over a raw socket; the whole response.
    static func httpGet(_ path: String, port: Int) async throws -> String {
        let collector = PipelinedUpgradeTests.Collector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) } }
            .connect(host: "127.0.0.1", port: port).get()
        try await channel.writeAndFlush(ByteBuffer(string: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        try await channel.closeFuture.get()   // the server closes after answering
        return collector.received.withLockedValue { String(buffer: $0) }
    }

    @Test("H-3: a black-holed STREAM connection is noticed within about a second (0.5 s pings) and rejoined, topics restored")
    func cutDetectedAndRejoined() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        // Alice's MESSAGE connection goes direct; only her STREAM connection crosses the proxy.
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let streamHarness = StreamEndpoint(alice: alice, proxyPort: proxy.port)
        let game = try streamHarness.channel("game")
        try await game.join()
        try await game.joinTopic("moves", options: JoinTopicOptions(meta: "white"))
        let bobGame = try bob.createStreamChannel("game")
        try await bobGame.join()
        try await bobGame.subscribeTopic("moves")
        try await game.publishTopicMessage(topic: "moves", message: "e4")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "e4" } != nil)

        await aliceEvents.clear()
        proxy.setMode(.blackhole)
        let cut = ContinuousClock.now
        let lost = await aliceEvents.first(within: soon, where: Self.streamLink("game", to: .connecting))?.link
        let detection = ContinuousClock.now - cut
        #expect(lost?.operation == .heartbeatTimeout)
        #expect(lost?.reasonCode == .keepAliveTimeout)
        #expect(detection < .milliseconds(1600), "detected after \(detection)")
        proxy.setMode(.pass)
        let back = await aliceEvents.first(within: soon, where: Self.streamLink("game", to: .connected))?.link
        #expect(back?.operation == .reconnected)
        #expect(back?.reasonCode == .rejoin)
        // The topic was rejoined by itself: Bob still gets Alice's moves.
        await bobEvents.clear()
        var delivered = false
        for attempt in 0..<50 where !delivered {
            try? await game.publishTopicMessage(topic: "moves", message: "Nf3-\(attempt)")
            delivered = await bobEvents.next(within: .milliseconds(100)) { $0.messageEvent?.topic == "moves" } != nil
        }
        #expect(delivered)
        #expect(await alice.linkState == .connected)   // the MESSAGE link never noticed
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("§2.9 topics: snapshots, remote join/leave topic events, subscriptions by user, limits and errors")
    func topics() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let (carol, carolEvents) = try await Harness.client("carol", port: harness.port)
        let aliceRoom = try alice.createStreamChannel("room")
        try await aliceRoom.join()
        try await aliceRoom.joinTopic("audio", options: JoinTopicOptions(qos: 1, meta: "mic"))
        let bobRoom = try bob.createStreamChannel("room")
        let members = try await bobRoom.join()
        #expect(members == ["alice", "bob"])
        let snapshot = await bobEvents.first(within: soon) { if case .topic(let e) = $0 { e.kind == .snapshot } else { false } }
        guard case .topic(let topicSnapshot)? = snapshot else { Issue.record("no topic snapshot"); return }
        #expect(topicSnapshot.topics == [TopicInfo(topic: "audio", publishers: [TopicPublisher(userId: "alice", meta: "mic")])])

        let carolRoom = try carol.createStreamChannel("room")
        try await carolRoom.join()
        try await bobRoom.joinTopic("audio")
        #expect(await carolEvents.first(within: soon) { if case .topic(let e) = $0 { e.kind == .remoteJoinTopic && e.userId == "bob" } else { false } } != nil)

        // Bob hears only Alice on "audio"; Carol hears everyone.
        let result = try await bobRoom.subscribeTopic("audio", users: ["alice", "bad/name"])
        #expect(result.succeeded == ["alice"])
        #expect(result.failed == ["bad/name"])
        #expect(await bobRoom.subscribedUsers(topic: "audio") == ["alice"])
        #expect(await bobRoom.subscribedUsers(topic: "video") == [])
        try await carolRoom.subscribeTopic("audio")
        try await aliceRoom.publishTopicMessage(topic: "audio", message: "from alice")
        try await bobRoom.publishTopicMessage(topic: "audio", message: "from bob")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "from alice" }?.messageEvent?.channelType == .stream)
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "from alice" } != nil)
        #expect(await carolEvents.first(within: soon) { $0.messageEvent?.text == "from bob" } != nil)
        #expect(await bobEvents.matching { $0.messageEvent?.text == "from bob" }.isEmpty)

        // Errors name the problem.
        await Self.expectError(.channelTopicNotJoined) { try await carolRoom.publishTopicMessage(topic: "audio", message: "x") }
        await Self.expectError(.channelMessageLengthExceedLimitation) { try await aliceRoom.publishTopicMessage(topic: "audio", message: String(repeating: "x", count: 1025)) }
        await Self.expectError(.channelInvalidTopicName) { try await aliceRoom.joinTopic("a-topic-name-too-long") }
        await Self.expectError(.channelInvalidTopicMeta) { try await aliceRoom.joinTopic("t", options: JoinTopicOptions(meta: String(repeating: "m", count: 257))) }
        await Self.expectError(.channelTopicNotSubscribed) { try await aliceRoom.unsubscribeTopic("nothing") }

        try await aliceRoom.leaveTopic("audio")
        #expect(await carolEvents.first(within: soon) { if case .topic(let e) = $0 { e.kind == .remoteLeaveTopic && e.userId == "alice" } else { false } } != nil)
        await aliceRoom.leave()
        #expect(await carolEvents.first(within: soon) { ($0.presenceEvent.map { $0.kind == .remoteLeave && $0.userId == "alice" && $0.channelType == .stream }) ?? false } != nil)
        for client in [alice, bob, carol] { await client.logout() }
    }

    static func expectError(_ code: RTMErrorCode, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(code)")
        } catch {
            #expect((error as? RTMError)?.code == code, "\(error)")
        }
    }
}

/// Makes Alice's stream channels connect through a proxy while her MESSAGE connection does not:
/// a second client object would be a second login, so the channel's endpoint is overridden.
struct StreamEndpoint {
    let alice: RTMClient
    let proxyPort: Int

    func channel(_ name: String) throws -> RTMStreamChannel {
        let channel = try alice.createStreamChannel(name)
        let endpoint = ClientTransport.Endpoint("ws://127.0.0.1:\(proxyPort)")!
        try channel.core.loop.submit { channel.core.endpoint = endpoint }.wait()
        return channel
    }
}
