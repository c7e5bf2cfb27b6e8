import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMServer

/// Publish acknowledgements carry the channel epoch of the message they acknowledge
/// (PROTOCOL.md §2.3, §3.1): the JSON `ok` in `epoch`, the binary `0x82` frame in its epoch runs.
@Suite(.realTime)
struct PublishAckEpochTests {
    static func binaryPublish(_ id: UInt64, _ text: String) -> ByteBuffer {
        var body = ByteBuffer()
        BinaryFrame.writePublish(into: &body, requestID: id, msgId: 700 + id, channel: "room", customType: nil, isText: true, payload: Array(text.utf8))
        return JSONPublishTests.clientFrame(0x2, Array(body.readableBytesView))
    }

    @Test("M-2: a JSON publish's ok (fast and general paths) and a binary publish's ack carry the epoch of the delivered message with that seq")
    func acksCarryTheDeliveredEpoch() async throws {
        let harness = try await Harness.start()
        let (client, _) = try await JSONPublishTests.aliceInRoom(port: harness.port)

        // One read: JSON (the fast reader), two binary; then a JSON one the general decoder takes
        // (a `\u` escape), and a resend of the first binary one (same msgId).
        try await client.send([JSONPublishTests.text(#"{"type":"publish","id":10,"channel":"room","text":"j"}"#),
                               Self.binaryPublish(11, "b1"), Self.binaryPublish(12, "b2")])
        try await client.send([JSONPublishTests.text(#"{"type":"publish","id":13,"channel":"room","text":"\u0041"}"#)])
        try await client.send([Self.binaryPublish(11, "b1")])
        let frames = try await client.waitFor { frames in
            frames.filter { $0.opcode == 0x2 }.compactMap { try? BinaryFrame.decode($0.payload) }.reduce(0) { count, frame in
                if case .publishAcks(let acks) = frame { count + acks.count } else { count }
            } >= 3
        }

        var delivered: [UInt64: String] = [:]
        var acks: [BinaryFrame.PublishAck] = []
        for frame in frames where frame.opcode == 0x2 {
            switch try BinaryFrame.decode(frame.payload) {
            case .messages(let messages): for message in messages { delivered[message.seq] = message.epoch }
            case .publishAcks(let a): acks += a
            default: Issue.record("unexpected binary frame")
            }
        }
        let oks = frames.filter { $0.opcode == 0x1 }.compactMap { try? FrameCodec.decode($0.payload) }.filter { $0.type == .ok && ($0.id ?? 0) >= 10 }
        let epoch = harness.server.hub.channelPosition(appId: Harness.appId, channel: "room").epoch
        #expect(delivered.count == 4 && delivered.values.allSatisfy { $0 == epoch })
        #expect(oks.map(\.id) == [10, 13] && oks.map(\.seq) == [1, 4])
        #expect(acks.map(\.requestID) == [11, 12, 11] && acks.map(\.seq) == [2, 3, 2])
        for ok in oks { #expect(ok.epoch != nil && ok.epoch == delivered[ok.seq ?? 0]) }
        for ack in acks { #expect(ack.epoch != nil && ack.epoch == delivered[ack.seq]) }
        try? await client.channel.close()
    }
}
