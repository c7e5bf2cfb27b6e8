import Foundation
import NIOCore
import Testing
@testable import RTMProtocol

/// The binary form of user messages (PROTOCOL.md §2.3: `0x03`, `0x04`, `0x83`, `0x84`).
struct BinaryUserFrameTests {
    @Test("M-1: binary sendUser round trips (text and data, with and without msgId / customType)")
    func sendUserRoundTrip() throws {
        for (msgId, customType, isText) in [(UInt64?(9), String?("t"), true), (nil, nil, false), (UInt64.max, "", true)] {
            var buffer = ByteBuffer()
            BinaryFrame.writeSendUser(into: &buffer, requestID: 7, msgId: msgId, receiver: "bob", customType: customType,
                                      isText: isText, payload: [0x68, 0x69])
            let decoded = try BinaryFrame.readSendUser(buffer).get()
            #expect(decoded.requestID == 7)
            #expect(decoded.msgId == msgId)
            #expect(decoded.receiver == "bob")
            #expect(decoded.customType == customType)
            #expect(decoded.isText == isText)
            #expect(Array(decoded.payload.readableBytesView) == [0x68, 0x69])
        }
    }

    @Test("the sendUser example of PROTOCOL.md §2.3, byte for byte")
    func sendUserExample() {
        var buffer = ByteBuffer()
        BinaryFrame.writeSendUser(into: &buffer, requestID: 7, msgId: 9, receiver: "bob", customType: nil, isText: true, payload: "hi".utf8)
        let expected = "0305" + "0700000000000000" + "0900000000000000" + "03626f62" + "6869"
        #expect(Self.hex(buffer) == expected)
    }

    @Test("a truncated sendUser is a typed error at every length, with the request id once it is readable")
    func sendUserTruncated() {
        var buffer = ByteBuffer()
        BinaryFrame.writeSendUser(into: &buffer, requestID: 42, msgId: 9, receiver: "bob", customType: "type", isText: true, payload: "".utf8)
        for length in 0..<buffer.readableBytes {
            switch BinaryFrame.readSendUser(buffer.getSlice(at: 0, length: length)!) {
            case .success:
                Issue.record("decoded a truncated sendUser (\(length) bytes)")
            case .failure(let error):
                #expect(error.requestID == (length >= 10 ? 42 : nil), "length \(length)")
                #expect(error.description.hasPrefix("malformed frame:"))
            }
        }
        #expect((try? BinaryFrame.readSendUser(buffer).get()) != nil)
    }

    @Test("ackUser round trips; trailing or missing bytes are typed errors")
    func ackUser() throws {
        for id: UInt64 in [0, 1, 127, 128, 300, UInt64.max] {
            var buffer = ByteBuffer()
            BinaryFrame.writeAckUser(into: &buffer, upTo: id)
            #expect(try BinaryFrame.readAckUser(buffer).get() == id)
            #expect(buffer.readableBytes == 1 + BinaryFrame.varintSize(id))
        }
        #expect(throws: FrameDecodingError.self) { try BinaryFrame.readAckUser(ByteBuffer(bytes: [0x04])).get() }
        #expect(throws: FrameDecodingError.self) { try BinaryFrame.readAckUser(ByteBuffer(bytes: [0x04, 0x80])).get() }
        #expect(throws: FrameDecodingError.self) { try BinaryFrame.readAckUser(ByteBuffer(bytes: [0x04, 0x01, 0x00])).get() }
    }

    @Test("sendUser replies round trip; the receiverOnline flag survives; truncation is a typed error")
    func replies() throws {
        let replies = [BinaryFrame.SendUserReply(requestID: 1, msgId: 100, receiverOnline: true),
                       BinaryFrame.SendUserReply(requestID: 2, msgId: 101, receiverOnline: false)]
        var buffer = ByteBuffer()
        BinaryFrame.writeSendUserReplies(into: &buffer, replies)
        guard case .sendUserReplies(let decoded) = try BinaryFrame.decode(buffer) else { Issue.record("not replies"); return }
        #expect(decoded == replies)
        for length in 1..<buffer.readableBytes {
            #expect(throws: FrameDecodingError.self) { _ = try BinaryFrame.decode(buffer.getSlice(at: 0, length: length)!) }
        }
    }

    @Test("user messages round trip (several per frame, text and data, customType); truncation and an empty frame are typed errors")
    func userMessages() throws {
        let messages = [
            BinaryFrame.UserMessage(msgId: 300, ts: 1_763_000_000_123, publisher: "alice", customType: nil, isText: true,
                                    payload: ByteBuffer(string: "hi")),
            BinaryFrame.UserMessage(msgId: 301, ts: 1_763_000_000_124, publisher: "carol", customType: "bin", isText: false,
                                    payload: ByteBuffer(bytes: [0, 1, 2])),
        ]
        var buffer = ByteBuffer()
        BinaryFrame.writeUserMessages(into: &buffer, epoch: "e-1", messages)
        guard case .userMessages(let epoch, let decoded) = try BinaryFrame.decode(buffer) else { Issue.record("not user messages"); return }
        #expect(epoch == "e-1")
        #expect(decoded == messages)
        var empty = ByteBuffer()
        BinaryFrame.writeUserMessages(into: &empty, epoch: "e-1", [BinaryFrame.UserMessage]())
        #expect(throws: FrameDecodingError.self) { _ = try BinaryFrame.decode(empty) }
        for length in 1..<buffer.readableBytes {
            guard case .userMessages(_, let some)? = try? BinaryFrame.decode(buffer.getSlice(at: 0, length: length)!) else { continue }
            #expect(some == [messages[0]], "a cut frame decodes only whole messages (\(length) bytes)")
        }
    }

    @Test("the user message example of PROTOCOL.md §2.3, byte for byte")
    func userMessageExample() {
        var buffer = ByteBuffer()
        BinaryFrame.writeUserMessages(into: &buffer, epoch: "e-1", [BinaryFrame.UserMessage(
            msgId: 300, ts: 1_763_000_000_123, publisher: "alice", customType: nil, isText: true, payload: ByteBuffer(string: "hi"))])
        let expected = "84" + "00" + "03652d31" + "ac02" + "fbbcf4d7a733" + "05616c696365" + "04" + "02" + "6869"
        #expect(Self.hex(buffer) == expected)
        var ack = ByteBuffer()
        BinaryFrame.writeAckUser(into: &ack, upTo: 300)
        #expect(Self.hex(ack) == "04ac02")
    }

    static func hex(_ buffer: ByteBuffer) -> String {
        buffer.readableBytesView.map { String(format: "%02x", $0) }.joined()
    }
}
