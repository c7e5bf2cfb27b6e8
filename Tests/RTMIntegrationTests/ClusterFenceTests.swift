import Foundation
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// A zombie node: paused (SIGSTOP) past its lease while the others declare it dead, then
/// resumed. It must learn that it was declared dead before it commits anything, send its
/// clients away with that reason, and then join again.
extension ClusterTests {
    @Test("P-2, M-3: a node paused past its lease (SIGSTOP) and resumed: a publish it read during the pause is never acknowledged nor delivered on the other node (refused with -11026 'declared dead' when answered); its clients get goaway (code 28) saying it was declared dead, never that it cannot reach the database, and close 1001; it counts the fence and then serves again")
    func zombieNodeIsFenced() async throws {
        // A 3 s lease and a 3 s wait for a lapsed node's own try of the database (1 s by
        // default): its renewals and that try answer in time on a loaded machine, so the node
        // that wakes reaches the database and learns of its fence, as the rule says it must.
        let (_, nodes) = try await RTMProcess.clusterNodes(["z1", "z2"], extraArguments: ["--lease-seconds", "3", "--test-cluster-probe-timeout", "3"])   // stopped by the .realTime trait's scope
        let (zombie, survivor) = (nodes[0], nodes[1])
        #expect(try await Self.waitForMetric("rtm_cluster_nodes", 2, port: survivor.port))
        let (observer, observerEvents) = try await ClusterTests.client("observer", port: survivor.port)
        try await observer.subscribe("room")
        let dave = try await Self.rawLogin("dave", port: zombie.port)   // no heartbeat of its own to worry about

        #expect(await zombie.process.pause())   // stopped before the publish is sent
        try await dave.write(RawPeer.text(#"{"type":"publish","id":7,"channel":"room","text":"from the zombie"}"#))
        // The survivor declares the paused node dead (its lease lapsed): one live node.
        #expect(try await Self.waitForMetric("rtm_cluster_nodes", 1, port: survivor.port))
        zombie.process.signal(SIGCONT)

        let goAway = await Self.frame(of: dave, containing: #""type":"goaway""#)
        #expect(goAway?.contains(#""code":\#(LinkStateChangeReason.kickedOutByServer.rawValue)"#) == true, "\(goAway ?? "no goaway")")
        // The reason is the fence's whichever of the node's timers fired first on waking (its
        // lapsed lease, its renewal): it reaches the database (`PartitionWatch`).
        #expect(goAway?.contains("declared dead") == true, "\(goAway ?? "no goaway")")
        #expect(await dave.waitForClose(within: soon))
        #expect(dave.frames().last?.closeCode == 1001)
        #expect(!dave.frames().map(\.text).contains { $0.contains("cannot reach") }, "\(dave.frames().map(\.text))")
        // The publish it read during the pause is refused, or (when the node learned of the
        // fence before it read it) not answered before the close: never acknowledged.
        let reply = dave.frames().map(\.text).first { $0.contains(#""id":7"#) }
        if let reply {
            #expect(reply.contains(#""code":\#(RTMErrorCode.channelPublishMessageTimeout.rawValue)"#) && reply.contains("declared dead"), "\(reply)")
        }
        #expect(await zombie.process.waitForLine(containing: "declared dead by the others", within: soon) != nil)
        #expect(try await Self.waitForMetric("rtm_cluster_fenced_total", 1, port: zombie.port))
        #expect(try await MetricsTests.scrape(zombie.port)["rtm_cluster_cut_off_total"] == 0)

        // It joins again and serves: a new client's publish through it reaches the other node;
        // the one it read during the pause never does.
        #expect(try await Self.waitForMetric("rtm_cluster_nodes", 2, port: survivor.port))
        let (erin, _) = try await ClusterTests.client("erin", port: zombie.port)
        _ = try await erin.publish(channel: "room", message: "after the fence")
        #expect(await observerEvents.first(within: soon) { $0.messageEvent?.text == "after the fence" } != nil)
        #expect(await observerEvents.all.filter { $0.messageEvent?.text == "from the zombie" }.isEmpty)
        await erin.logout()
        await observer.logout()
        await dave.close()
    }

    @Test("P-2: a node whose lease lapsed by its own clock (the renewal round that spanned a pause failed) while it reaches the database is not cut off when another node says it reaches the database: it tries the database itself first; its clients are not sent away with 'cannot reach'")
    func staleLapseIsNotACutOff() async throws {
        // Its own try of the database may take 5 s (a loaded machine), not the default 1 s.
        let (_, a, b) = try await Self.cluster { _, _, _, config in config.clusterPeerProbeTimeout = .seconds(5) }   // stopped by the .realTime trait's scope
        let dave = try await Self.rawLogin("dave", port: a.port)
        // What node a's lease registry reports when the round that spanned a pause failed by
        // its deadline: its lease lapsed by its own clock. Node b says "database: up".
        a.server.hub.handle(.leaseLapsed(peers: ["127.0.0.1:\(b.port)"]))
        // It asks b, then tries the database itself, reaches it: the lapse ends there (nothing
        // else ends it here: its registry never saw a lapse). Before it tried, the others'
        // answer alone cut it off, and which reason its clients got depended on which came
        // first: that answer, or the renewal that finds its fence.
        let ended = await eventually(within: .seconds(20), every: .milliseconds(20)) {
            (try? await StreamTests.httpGet("/health", port: a.port)).map { $0.contains("database: up") && !$0.contains("lease:") } == true
        }
        let health = (try? await StreamTests.httpGet("/health", port: a.port)) ?? ""
        #expect(ended, "\(health)")
        let metrics = try await MetricsTests.scrape(a.port)
        #expect(metrics["rtm_cluster_lease_lapses_total"] == 1 && metrics["rtm_cluster_cut_off_total"] == 0)
        #expect(try await StreamTests.httpGet("/ready", port: a.port).hasPrefix("HTTP/1.1 200"))
        #expect(!dave.frames().map(\.text).contains { $0.contains(#""type":"goaway""#) }, "\(dave.frames().map(\.text))")
        // Still served: a request answered.
        try await dave.write(RawPeer.text(#"{"type":"publish","id":2,"channel":"room","text":"still here"}"#))
        let answer = await Self.frame(of: dave, containing: #""id":2"#)
        #expect(answer?.contains(#""type":"ok""#) == true, "\(answer ?? "no answer")")
        await dave.close()
    }

    /// A raw client logged in as `user` (heartbeat 30 s: it need not ping during the test).
    private static func rawLogin(_ user: String, port: Int) async throws -> RawPeer {
        let peer = try await RawPeer.connect(port: port)
        var hello = ByteBuffer(string: RawPeer.upgradeRequest())
        var login = RawPeer.text(#"{"type":"login","id":1,"appId":"\#(Harness.appId)","userId":"\#(user)","token":"\#(Harness.token(user))","heartbeatInterval":30,"presenceTimeout":30}"#)
        hello.writeBuffer(&login)
        try await peer.write(hello)
        let reply = await frame(of: peer, containing: #""id":1"#)
        try #require(reply?.contains(#""type":"ok""#) == true, "\(user) not logged in: \(reply ?? "no reply")")
        return peer
    }

    /// The first text frame `peer` received that contains `text` (bounded: 20 s).
    private static func frame(of peer: RawPeer, containing text: String) async -> String? {
        await firstValue(within: .seconds(20)) { peer.frames().map(\.text).first(where: { $0.contains(text) }) }
    }
}
