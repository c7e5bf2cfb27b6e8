import Foundation
import NIOCore
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// An `ackUser` deletes only what was written to the connection it comes on (SPEC M-1): a
/// client that acknowledges ids it was never sent (counting on its own, or ahead of messages
/// still on their way) loses nothing.
struct UserAckTests {
    /// A raw MESSAGE connection of `user` that sends `after` right behind its login, in one write.
    private static func rawLogin(_ user: String, port: Int, after: String) async throws -> RawPeer {
        let peer = try await RawPeer.connect(port: port)
        var bytes = ByteBuffer(string: RawPeer.upgradeRequest())
        var login = RawPeer.text(#"{"type":"login","id":1,"appId":"\#(Harness.appId)","userId":"\#(user)","token":"\#(Harness.token(user))"}"#)
        bytes.writeBuffer(&login)
        var next = RawPeer.text(after)
        bytes.writeBuffer(&next)
        try await peer.write(bytes)
        return peer
    }

    /// The texts of the user messages `peer` received so far.
    private static func userTexts(_ peer: RawPeer) -> [String] {
        peer.frames().map(\.text).filter { $0.contains(#""channelType":"user""#) && $0.contains(#""type":"message""#) }
    }

    @Test("M-1: an ackUser naming an id above every id written to its connection (sent before the waiting messages arrive) deletes nothing: they come again at the next login")
    func ackAheadOfDeliveryDeletesNothing() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        for i in 1...3 { _ = try await alice.publish(toUser: "bob", message: "waiting-\(i)") }   // bob is offline

        let bob = try await Self.rawLogin("bob", port: harness.port, after: #"{"type":"ackUser","msgId":1000000}"#)
        #expect(await waitUntil { Self.userTexts(bob).count == 3 }, "\(bob.frames().map(\.text))")
        await bob.close()
        await harness.server.hub.mailbox.drain()   // whatever the ack did is committed

        let (bobAgain, events) = try await Harness.client("bob", port: harness.port)
        let texts = await events.first(within: soon) { $0.messageEvent?.text == "waiting-3" }
        #expect(texts != nil, "the waiting messages were deleted by an acknowledgement of ids never sent")
        for client in [alice, bobAgain] { await client.logout() }
        await harness.stop()
    }
}
