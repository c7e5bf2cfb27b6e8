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

    @Test("a value that does not fit its field names the field (its full path) and the problem in our words, never Swift's or Foundation's")
    func fieldProblemsInOurWords() {
        let id = "must be a whole number from 0 to 9223372036854775807"
        let int = "must be a whole number from -9223372036854775808 to 9223372036854775807"
        let cases: [(String, String)] = [
            (#"{"type":"ping","id":1.5}"#, "invalid value for field 'id': \(id), got 1.5"),
            (#"{"type":"ping","id":-1}"#, "invalid value for field 'id': \(id)"),
            (#"{"type":"ping","id":1e20}"#, "invalid value for field 'id': \(id)"),
            (#"{"type":"ping","id":1e400}"#, "invalid value for field 'id': \(id)"),
            (#"{"type":"ping","msgId":99999999999999999999}"#, "invalid value for field 'msgId': \(id)"),
            (#"{"type":"ping","qos":2.5}"#, "invalid value for field 'qos': \(int), got 2.5"),
            (#"{"type":"ping","heartbeatInterval":1e400}"#, "invalid value for field 'heartbeatInterval': the number is out of range"),
            (#"{"type":"ping","heartbeatInterval":-1e400}"#, "invalid value for field 'heartbeatInterval': the number is out of range"),
            (#"{"type":"ping","data":"%%%"}"#, "invalid value for field 'data': must be a base64 string"),
            (#"{"type":"ping","positions":{"room":{"epoch":"e","seq":1.5}}}"#,
             "invalid value for field 'positions.room.seq': must be a whole number from 0 to 18446744073709551615, got 1.5"),
            (#"{"type":"ping","metadata":{"majorRevision":-1,"items":[{"key":"k","value":"v","revision":0.5}]}}"#,
             "invalid value for field 'metadata.items[0].revision': \(int), got 0.5"),
            (#"{"type":"ping","id":"7"}"#, "wrong type for field 'id': expected a whole number"),
            (#"{"type":"ping","id":1,"#, "not valid JSON"),
        ]
        for (input, expected) in cases {
            do {
                _ = try FrameCodec.decode(ByteBuffer(string: input))
                Issue.record("decoded \(input)")
            } catch {
                #expect(error.reason == expected, "\(input)")
                for foreign in ["Swift", "Base64", "representable", "Foundation", "NSCocoa", "The given data"] {
                    #expect(!error.reason.contains(foreign), "\(input): \(error.reason)")
                }
            }
        }
    }

    @Test("a value that fits its field still decodes: whole numbers written with an exponent, fractions where a fraction is allowed")
    func fittingValuesDecode() throws {
        let frame = try FrameCodec.decode(ByteBuffer(string: #"{"type":"ping","id":1e3,"heartbeatInterval":0.25,"positions":{"r":{"epoch":"e","seq":5}}}"#))
        #expect(frame.id == 1000)
        #expect(frame.heartbeatInterval == 0.25)
        #expect(frame.positions?["r"]?.seq == 5)
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

    @Test("§8: a message's size (32 KB, a topic message its own limit) and custom type (≤ 32 Unicode code points, as JSON Schema counts) in one check for the server, its admin API and the SDK")
    func payloadLimits() {
        let limits = Limits()
        #expect(limits.payloadProblem(size: 32 * 1024, customType: String(repeating: "t", count: 32)) == nil)
        #expect(limits.payloadProblem(size: 32 * 1024 + 1, customType: nil)?.0 == .channelMessageLengthExceedLimitation)
        #expect(limits.payloadProblem(size: 1, customType: String(repeating: "t", count: 33))?.0 == .channelCustomTypeLengthOverflow)
        // 17 characters of 2 code points each: 34 code points, over the limit (a character
        // count would let it through where the admin API's JSON Schema refuses it).
        let thumbs = String(repeating: "👍🏽", count: 17)
        #expect(thumbs.count == 17 && thumbs.unicodeScalars.count == 34)
        #expect(limits.payloadProblem(size: 1, customType: thumbs)?.0 == .channelCustomTypeLengthOverflow)
        #expect(limits.payloadProblem(size: 1, customType: String(repeating: "👍🏽", count: 16)) == nil)
        let topic = limits.payloadProblem(size: limits.maxTopicPayloadBytes + 1, customType: nil, maxBytes: limits.maxTopicPayloadBytes, what: "topic message")
        #expect(topic?.0 == .channelMessageLengthExceedLimitation)
        #expect(topic?.1 == "topic message is \(limits.maxTopicPayloadBytes + 1) bytes; the limit is \(limits.maxTopicPayloadBytes)")
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
        BinaryFrame.writeMessages(into: &message, seq: 5, ts: 1234, epoch: "e-1", channel: "room".utf8, publisher: "alice",
                                  messages: [Body(customType: nil, isText: false, payload: ByteBuffer(bytes: [1, 2, 3]))])
        guard case .messages(let ms) = try BinaryFrame.decode(message) else { Issue.record("not a message"); return }
        #expect(ms == [BinaryFrame.Message(seq: 5, ts: 1234, epoch: "e-1", channel: "room", publisher: "alice",
                                           customType: nil, isText: false, payload: ByteBuffer(bytes: [1, 2, 3]))])

        var acks = ByteBuffer()
        var written = BinaryFrame.PublishAcks()
        written.append(requestID: 1, seq: 10, epoch: "e-1")
        written.append(requestID: 2, seq: 11, epoch: "e-1")
        BinaryFrame.writePublishAcks(into: &acks, written)
        guard case .publishAcks(let list) = try BinaryFrame.decode(acks) else { Issue.record("not acks"); return }
        #expect(list == [.init(requestID: 1, seq: 10, epoch: "e-1"), .init(requestID: 2, seq: 11, epoch: "e-1")])

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
    struct Body: BinaryFrame.MessageBody { var customType: String?; var isText: Bool; var payload: ByteBuffer }

    @Test("a message frame holds consecutive messages: sequence numbers from the first, each with its own type, kind and payload; the WebSocket header matches the body (short, 16-bit and 64-bit lengths)")
    func messageBatches() throws {
        for (count, size) in [(1, 10), (3, 300), (40, 2000)] {
            let bodies = (0..<count).map { i in
                Body(customType: i % 3 == 1 ? "kind\(i)" : nil, isText: i % 2 == 0,
                     payload: ByteBuffer(bytes: (0..<(size + i)).map { UInt8(truncatingIfNeeded: $0 &+ i) }))
            }
            var frame = ByteBuffer()
            BinaryFrame.writeMessagesFrame(into: &frame, seq: 1_000_000, ts: 1_763_000_000_123,
                                           template: .init(epoch: "ep-3", channel: "room".utf8, publisher: "alice"), messages: bodies)
            // The WebSocket header: FIN + binary, unmasked, the body's exact length.
            var body = frame
            #expect(body.readInteger(as: UInt8.self) == 0x82)
            let b1: UInt8 = body.readInteger()!
            let length = b1 < 126 ? Int(b1) : b1 == 126 ? Int(body.readInteger(as: UInt16.self)!) : Int(body.readInteger(as: UInt64.self)!)
            #expect(length == body.readableBytes)
            // The same body as the plain writer's.
            var plain = ByteBuffer()
            BinaryFrame.writeMessages(into: &plain, seq: 1_000_000, ts: 1_763_000_000_123, epoch: "ep-3", channel: "room".utf8,
                                      publisher: "alice", messages: bodies)
            #expect(plain == body)
            guard case .messages(let decoded) = try BinaryFrame.decode(body) else { Issue.record("not messages"); return }
            #expect(decoded.count == count)
            for (i, m) in decoded.enumerated() {
                #expect(m.seq == 1_000_000 + UInt64(i) && m.ts == 1_763_000_000_123 && m.epoch == "ep-3")
                #expect(m.channel == "room" && m.publisher == "alice")
                #expect(m.customType == bodies[i].customType && m.isText == bodies[i].isText && m.payload == bodies[i].payload)
            }
            // Every truncation is a typed error or (cut between items) fewer whole messages.
            for cut in 0..<body.readableBytes where count < 40 || cut % 97 == 0 {
                do {
                    guard case .messages(let some) = try BinaryFrame.decode(body.getSlice(at: body.readerIndex, length: cut)!) else { continue }
                    #expect(some.count < count)
                    #expect(some == Array(decoded.prefix(some.count)))
                } catch {}
            }
        }
    }

    @Test("the message example of PROTOCOL.md §2.3, byte for byte")
    func documentedExample() {
        var body = ByteBuffer()
        BinaryFrame.writeMessages(into: &body, seq: 300, ts: 1_763_000_000_123, epoch: "e-1", channel: "room".utf8, publisher: "alice",
                                  messages: [Body(customType: nil, isText: true, payload: ByteBuffer(string: "hi"))])
        let hex = "81 00 ac02 fbbcf4d7a733 03 652d31 04 726f6f6d 05 616c696365 04 02 6869".replacingOccurrences(of: " ", with: "")
        #expect(body.readableBytesView.map { String(format: "%02x", $0) }.joined() == hex)
    }

    @Test("varints: sizes and round trips at the 7-bit boundaries; an overlong varint is rejected")
    func varints() {
        for value: UInt64 in [0, 1, 127, 128, 16_383, 16_384, 1 << 35, UInt64.max] {
            var b = ByteBuffer()
            struct None: BinaryFrame.MessageBody { var customType: String? { nil }; var isText: Bool { false }; var payload: ByteBuffer { ByteBuffer() } }
            BinaryFrame.writeMessages(into: &b, seq: value, ts: 0, epoch: "", channel: "c".utf8, publisher: "p", messages: [None()])
            b.moveReaderIndex(forwardBy: 2)
            let start = b.readableBytes
            #expect(BinaryFrame.readVarint(&b) == value)
            #expect(start - b.readableBytes == BinaryFrame.varintSize(value))
        }
        var overlong = ByteBuffer(bytes: [UInt8](repeating: 0xFF, count: 11))
        #expect(BinaryFrame.readVarint(&overlong) == nil)
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
        for ts: Int64? in [7, nil] {
            var pong = ByteBuffer()
            FrameCodec.writePong(ts: ts, framed: false, into: &pong)
            #expect(pong == FrameCodec.encode(Frame(type: .pong, ts: ts)))
        }
    }

    @Test("H-1: the fast path takes exact pings only (JSON integers that fit Int64), and its framed pong is the codec's pong in one text frame")
    func fastPingStrictAndFramedPong() throws {
        for ts: Int64 in [0, 5, -5, 1_763_000_000_123, .max, .min] {
            #expect(FrameCodec.fastPing(ByteBuffer(string: #"{"type":"ping","ts":\#(ts)}"#)) == .some(ts))
            #expect(FrameCodec.fastPing(ByteBuffer(string: #"{"ts":\#(ts),"type":"ping"}"#)) == .some(ts))
            var framed = ByteBuffer()
            FrameCodec.writePong(ts: ts, framed: true, into: &framed)
            let pong = FrameCodec.encode(Frame(type: .pong, ts: ts))
            #expect(framed.readableBytesView.prefix(2).elementsEqual([0x81, UInt8(pong.readableBytes)]))
            #expect(framed.getSlice(at: 2, length: framed.readableBytes - 2) == pong)
            #expect(FrameCodec.pongLength(ts: ts) == pong.readableBytes)
        }
        #expect(FrameCodec.pongLength(ts: nil) == FrameCodec.encode(Frame(type: .pong)).readableBytes)
        // Declined (the full decoder reads them, or refuses them): not JSON integers, too big,
        // spaces, anything after the object, a missing brace.
        for text in [#"{"type":"ping","ts":+5}"#, #"{"type":"ping","ts":05}"#, #"{"type":"ping","ts":-}"#,
                     #"{"type":"ping","ts":9223372036854775808}"#, #"{"type":"ping","ts":-9223372036854775809}"#,
                     #"{"type":"ping","ts":1.5}"#, #"{"type":"ping", "ts":5}"#, #"{"type":"ping"} "#, #"{"type":"ping""#,
                     #"{"ts":5,"type":"ping","id":1}"#, #"{"ts":5}"#, #"{"type":"ping",}"#] {
            let buffer = ByteBuffer(string: text)
            #expect(FrameCodec.fastPing(buffer) == nil, "\(text)")
            if let frame = try? FrameCodec.decode(buffer), let ping = FrameCodec.fastPing(buffer) {
                #expect(frame.type == .ping && frame.ts == ping)
            }
        }
    }

    @Test("H-1: a repeated key goes to the full decoder, so the fast path never reads a frame otherwise (found by fuzzing)")
    func fastPingRepeatedKeys() throws {
        for text in [#"{"type":"pgin","type":"ping","ts":100}"#, #"{"type":"ping","type":"pong"}"#,
                     #"{"type":"ping","ts":1,"ts":2}"#, #"{"ts":1,"type":"ping","ts":2}"#] {
            let buffer = ByteBuffer(string: text)
            #expect(FrameCodec.fastPing(buffer) == nil, "\(text)")
            if let frame = try? FrameCodec.decode(buffer), let ping = FrameCodec.fastPing(buffer) {
                #expect(frame.type == .ping && frame.ts == ping)
            }
        }
    }
}
