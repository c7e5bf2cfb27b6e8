import Foundation
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// The SDK's publish receipt: sequence number and channel epoch, as delivered (SPEC M-2).
@Suite(.realTime, .serialized)
struct PublishReceiptTests {
    @Test("M-2: publishWithReceipt returns the seq and channel epoch the delivered MessageEvent carries, over the binary ack (text, data) and the JSON ok (storeInHistory); publish still returns the seq")
    func receiptMatchesDelivery() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let text = try await alice.publishWithReceipt(channel: "room", message: "binary ack")
        let data = try await alice.publishWithReceipt(channel: "room", data: Data([1, 2]))
        let json = try await alice.publishWithReceipt(channel: "room", message: "json ok", storeInHistory: true)
        let seq = try await alice.publish(channel: "room", message: "plain")
        let epoch = harness.server.hub.channelPosition(appId: Harness.appId, channel: "room").epoch
        #expect([text, data, json].map(\.seq) == [1, 2, 3] && seq == 4)
        #expect([text, data, json].allSatisfy { $0.epoch == epoch })
        for receipt in [text, data, json] {
            let delivered = await bobEvents.first(within: soon) { $0.messageEvent?.seq == receipt.seq }?.messageEvent
            #expect(delivered?.epoch == receipt.epoch)
        }
        await alice.logout()
        await bob.logout()
    }
}
