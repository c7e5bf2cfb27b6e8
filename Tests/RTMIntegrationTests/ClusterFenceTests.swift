import Foundation
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// A zombie node: paused (SIGSTOP) past its lease while the others declare it dead, then
/// resumed. It must learn that it was declared dead before it commits anything, send its
/// clients away, and then join again.
extension ClusterTests {
    @Test("P-2, M-3: a node paused past its lease (SIGSTOP) and resumed: a publish it read during the pause is never acknowledged nor delivered on the other node (refused with -11026 'declared dead' when answered); its clients get goaway (code 28) and close 1001; it counts the fence and then serves again")
    func zombieNodeIsFenced() async throws {
        try await RTMProcess.withClusterNodes(["z1", "z2"], extraArguments: ["--lease-seconds", "1"]) { _, nodes in
            let (zombie, survivor) = (nodes[0], nodes[1])
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 2, port: survivor.port))
            let (observer, observerEvents) = try await Harness.client("observer", port: survivor.port)
            try await observer.subscribe("room")
            // dave, a raw client of the node that will be paused (no heartbeat of its own to worry about).
            let dave = try await RawPeer.connect(port: zombie.port)
            var hello = ByteBuffer(string: RawPeer.upgradeRequest())
            var login = RawPeer.text(#"{"type":"login","id":1,"appId":"\#(Harness.appId)","userId":"dave","token":"\#(Harness.token("dave"))","heartbeatInterval":30,"presenceTimeout":30}"#)
            hello.writeBuffer(&login)
            try await dave.write(hello)
            #expect(await Self.frame(of: dave, containing: #""id":1"#) != nil)

            #expect(await zombie.process.pause())   // stopped before the publish is sent
            try await dave.write(RawPeer.text(#"{"type":"publish","id":7,"channel":"room","text":"from the zombie"}"#))
            // The survivor declares the paused node dead (its lease of 1 s lapsed): one live node.
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 1, port: survivor.port))
            zombie.process.signal(SIGCONT)

            let goAway = await Self.frame(of: dave, containing: #""type":"goaway""#)
            #expect(goAway?.contains(#""code":\#(LinkStateChangeReason.kickedOutByServer.rawValue)"#) == true, "\(goAway ?? "no goaway")")
            #expect(goAway?.contains("declared dead") == true, "\(goAway ?? "no goaway")")
            #expect(await dave.waitForClose(within: soon))
            #expect(dave.frames().last?.closeCode == 1001)
            // The publish it read during the pause is refused, or (when the node learned of the
            // fence before it read it) not answered before the close: never acknowledged.
            let reply = dave.frames().map(\.text).first { $0.contains(#""id":7"#) }
            if let reply {
                #expect(reply.contains(#""code":\#(RTMErrorCode.channelPublishMessageTimeout.rawValue)"#) && reply.contains("declared dead"), "\(reply)")
            }
            #expect(await zombie.process.waitForLine(containing: "declared dead by the others", within: soon) != nil)
            #expect(try await Self.waitForMetric("rtm_cluster_fenced_total", 1, port: zombie.port))

            // It joins again and serves: a new client's publish through it reaches the other node;
            // the one it read during the pause never does.
            #expect(try await Self.waitForMetric("rtm_cluster_nodes", 2, port: survivor.port))
            let (erin, _) = try await Harness.client("erin", port: zombie.port)
            _ = try await erin.publish(channel: "room", message: "after the fence")
            #expect(await observerEvents.first(within: soon) { $0.messageEvent?.text == "after the fence" } != nil)
            #expect(await observerEvents.all.filter { $0.messageEvent?.text == "from the zombie" }.isEmpty)
            await erin.logout()
            await observer.logout()
            await dave.close()
        }
    }

    /// The first text frame `peer` received that contains `text` (bounded).
    private static func frame(of peer: RawPeer, containing text: String) async -> String? {
        await firstValue(within: .seconds(10)) { peer.frames().map(\.text).first(where: { $0.contains(text) }) }
    }
}
