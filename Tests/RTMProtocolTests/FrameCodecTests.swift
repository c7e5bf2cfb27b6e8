import Foundation
import NIOCore
import Testing
@testable import RTMProtocol

struct FrameCodecTests {
    @Test("round trip keeps every field; absent fields are not written")
    func roundTrip() throws {
        let frame = Frame(type: .publish, id: 42, channel: "room", text: "héllo", customType: "chat")
        let buffer = FrameCodec.encode(frame)
        let json = String(buffer: buffer)
        #expect(!json.contains("null"))
        #expect(!json.contains("appId"))
        #expect(try FrameCodec.decode(buffer) == frame)
        let binary = Frame(type: .message, channel: "c", data: Data([0, 255, 7]), seq: 9)
        #expect(try FrameCodec.decode(FrameCodec.encode(binary)) == binary)
    }

    @Test("readers tolerate unknown fields and keep unknown types as open values")
    func tolerantReader() throws {
        let frame = try FrameCodec.decode(ByteBuffer(string: #"{"type":"futureOp","id":3,"newField":{"x":[1,2]}}"#))
        #expect(frame.type == FrameType(rawValue: "futureOp"))
        #expect(frame.type != .publish)
        #expect(frame.id == 3)
    }

    @Test("malformed input gives a typed error naming the problem, never a crash")
    func malformed() {
        let cases: [(String, String)] = [
            ("", "empty"),
            ("{", "JSON"),
            ("[1,2]", ""),
            (#"{"id":1}"#, "missing field 'type'"),
            (#"{"type":"ping","id":"x"}"#, "'id'"),
            (#"{"type":"ping","id":-1}"#, "'id'"),
            (#"{"type":"publish","data":"%%%"}"#, ""),
        ]
        for (input, expected) in cases {
            do {
                _ = try FrameCodec.decode(ByteBuffer(string: input))
                Issue.record("decoded \(input)")
            } catch {
                #expect(error.description.hasPrefix("malformed frame"))
                if !expected.isEmpty { #expect(error.reason.contains(expected), "\(input): \(error.reason)") }
            }
        }
    }

    @Test("a broadcast frame is byte-for-byte identical for every subscriber (nothing per recipient)")
    func broadcastIsRecipientFree() {
        let message = Frame(type: .message, channel: "room", channelType: "message", publisher: "alice", text: "hi", seq: 1, ts: 1)
        #expect(FrameCodec.encode(message) == FrameCodec.encode(message))
        #expect(message.userId == nil)   // no receiver id in a channel message
    }

    @Test("§8: names: ≤ 64 characters of the allowed set, not empty, not \"null\"")
    func names() {
        let limits = Limits()
        #expect(limits.nameProblem("room-1_ok:yes", kind: "channel") == nil)
        #expect(limits.nameProblem("with space", kind: "channel") == nil)
        #expect(limits.nameProblem(String(repeating: "a", count: 64), kind: "channel") == nil)
        #expect(limits.nameProblem(String(repeating: "a", count: 65), kind: "channel")?.contains("64") == true)
        #expect(limits.nameProblem("", kind: "userId")?.contains("empty") == true)
        #expect(limits.nameProblem("null", kind: "userId") != nil)
        #expect(limits.nameProblem("a/b", kind: "channel")?.contains("'/'") == true)
        #expect(limits.nameProblem("日本", kind: "channel") != nil)
    }

    @Test("error codes and reasons carry the reference's numbers and names")
    func codes() {
        #expect(RTMErrorCode.channelMessageLengthExceedLimitation.rawValue == -11010)
        #expect(RTMErrorCode.invalidToken.description == "invalidToken")
        #expect(LinkStateChangeReason.sameUidLogin.rawValue == 27)
        #expect(LinkStateChangeReason.keepAliveTimeout.rawValue == 29)
        #expect(LinkStateChangeReason(rawValue: 999).description == "reason 999")
        #expect(PresenceEventKind.remoteTimeout.referenceValue == 5)
    }
}

/// The compact binary form (PROTOCOL.md §2.3).
struct BinaryFrameTests {
    @Test("binary publish, message and acks round trip; truncated input is a typed error at every length")
    func roundTrip() throws {
        var publish = ByteBuffer()
        BinaryFrame.writePublish(into: &publish, requestID: 7, msgId: 99, channel: "room", customType: "t", isText: true, payload: "hi".utf8)
        let decoded = try BinaryFrame.readPublish(publish).get()
        #expect(decoded.requestID == 7 && decoded.msgId == 99 && decoded.channel == "room" && decoded.customType == "t")
        #expect(decoded.isText && String(buffer: decoded.payload) == "hi")

        var message = ByteBuffer()
        BinaryFrame.writeMessage(into: &message, seq: 5, ts: 1234, epoch: "e-1", channel: "room".utf8, publisher: "alice",
                                 customType: nil, isText: false, payload: ByteBuffer(bytes: [1, 2, 3]))
        guard case .message(let m) = try BinaryFrame.decode(message) else { Issue.record("not a message"); return }
        #expect(m == BinaryFrame.Message(seq: 5, ts: 1234, epoch: "e-1", channel: "room", publisher: "alice",
                                         customType: nil, isText: false, payload: ByteBuffer(bytes: [1, 2, 3])))

        var acks = ByteBuffer()
        BinaryFrame.writePublishAcks(into: &acks, [(1, 10), (2, 11)])
        guard case .publishAcks(let list) = try BinaryFrame.decode(acks) else { Issue.record("not acks"); return }
        #expect(list.map(\.requestID) == [1, 2] && list.map(\.seq) == [10, 11])

        // Every truncation of a message header fails cleanly (the payload may be cut anywhere).
        let headerLength = message.readableBytes - 3
        for length in 0..<headerLength {
            #expect(throws: FrameDecodingError.self) { _ = try BinaryFrame.decode(message.getSlice(at: 0, length: length)!) }
        }
        for length in 0..<(publish.readableBytes - 2) {
            if case .success = BinaryFrame.readPublish(publish.getSlice(at: 0, length: length)!) { Issue.record("decoded a truncated publish (\(length))") }
        }
    }
}

extension BinaryFrameTests {
    @Test("the server's fast message writer produces exactly the documented frame (short, 16-bit and custom-type lengths)")
    func fastWriterMatchesLayout() {
        for (size, customType) in [(10, nil), (300, nil), (20, "kind")] as [(Int, String?)] {
            let payload = ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0) })
            var slow = ByteBuffer()
            var body = ByteBuffer()
            BinaryFrame.writeMessage(into: &body, seq: 42, ts: -7, epoch: "ep-3", channel: "room".utf8, publisher: "alice",
                                     customType: customType, isText: true, payload: payload)
            BinaryFrame.writeWebSocketHeader(into: &slow, length: body.readableBytes)
            slow.writeImmutableBuffer(body)
            var fast = ByteBuffer()
            BinaryFrame.writeMessageFrame(into: &fast, seq: 42, ts: -7,
                                          template: .init(epoch: "ep-3", channel: "room".utf8, publisher: "alice"),
                                          customType: customType, isText: true, payload: payload)
            #expect(fast == slow, "size \(size)")
        }
    }
}

extension FrameCodecTests {
    @Test("H-1: the heartbeat fast path reads what the codec writes, and declines anything else")
    func fastPing() {
        #expect(FrameCodec.fastPing(FrameCodec.encode(Frame(type: .ping, ts: 1_763_000_000_123))) == .some(1_763_000_000_123))
        #expect(FrameCodec.fastPing(ByteBuffer(string: #"{"type":"ping"}"#)) == .some(nil))
        #expect(FrameCodec.fastPing(ByteBuffer(string: #"{"type":"ping","ts":5}"#)) == .some(5))
        #expect(FrameCodec.fastPing(ByteBuffer(string: #"{"type":"pong","ts":5}"#)) == nil)
        #expect(FrameCodec.fastPing(ByteBuffer(string: #"{"type":"ping","id":1}"#)) == nil)
        #expect(FrameCodec.fastPing(ByteBuffer(string: #"{"type":"ping","ts":"x"}"#)) == nil)
        #expect(FrameCodec.encodePong(ts: 7, allocator: ByteBufferAllocator()) == FrameCodec.encode(Frame(type: .pong, ts: 7)))
        #expect(FrameCodec.encodePong(ts: nil, allocator: ByteBufferAllocator()) == FrameCodec.encode(Frame(type: .pong)))
    }
}
