import Foundation
import NIOCore
import Testing
@testable import RTMProtocol

/// The JSON `publish` fast path (`FrameCodec.readPublish`, `writePublishOK`) against the general
/// codec, which stays the reference: whatever the fast reader accepts, the decoder reads the same
/// way; whatever it is unsure of, it leaves to the decoder.
struct PublishFastPathTests {
    /// The fast reading of `json` and the general decoder's agree; returns whether the fast path took it.
    @discardableResult
    static func agree(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        agree(ByteBuffer(string: json), sourceLocation: sourceLocation)
    }

    @discardableResult
    static func agree(_ buffer: ByteBuffer, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        guard let fast = FrameCodec.readPublish(buffer) else { return false }
        guard let frame = try? FrameCodec.decode(buffer) else {
            Issue.record("the fast path read a frame the decoder rejects: \(String(buffer: buffer))", sourceLocation: sourceLocation)
            return true
        }
        #expect(frame.type == .publish, sourceLocation: sourceLocation)
        #expect(frame.id == fast.requestID, sourceLocation: sourceLocation)
        #expect(frame.msgId == fast.msgId, sourceLocation: sourceLocation)
        #expect(frame.channel == fast.channel, sourceLocation: sourceLocation)
        #expect(frame.customType == fast.customType, sourceLocation: sourceLocation)
        #expect(frame.storeInHistory == nil, sourceLocation: sourceLocation)
        #expect(fast.isText == (frame.text != nil), sourceLocation: sourceLocation)
        let payload = Array(fast.payload.readableBytesView)
        if let text = frame.text {
            #expect(payload == Array(text.utf8), sourceLocation: sourceLocation)
        } else {
            #expect(payload == Array(frame.data ?? Data()), sourceLocation: sourceLocation)
        }
        return true
    }

    @Test("What encoders send is read on the fast path, as the decoder reads it: any key order, whitespace, escapes, non-ASCII, base64 data, msgId, customType")
    func acceptsCommonForms() {
        let accepted = [
            #"{"type":"publish","id":3,"channel":"room","text":"hello","msgId":8812733}"#,
            #"{"channel":"room","id":0,"msgId":9223372036854775807,"text":"","type":"publish"}"#,
            #" { "type" : "publish" , "id" : 12 ,"channel":"a-b_c","text":"x"  } "#,
            "{\"type\":\"publish\",\n\t\"id\":1,\r\n\"channel\":\"room\",\"text\":\"y\"}",
            #"{"type":"publish","id":4,"channel":"room","text":"héllo 世界 🎉"}"#,
            #"{"type":"publish","id":5,"channel":"room","text":"say \"hi\"\\ \/ \b\f\n\r\t end"}"#,
            #"{"type":"publish","id":6,"channel":"room","data":"AP8HAA==","customType":"bin"}"#,
            #"{"type":"publish","id":7,"channel":"room","data":"a\/b+"}"#,
            #"{"type":"publish","id":8,"channel":"room","text":"t","customType":"café"}"#,
            #"{"type":"publish","id":9,"channel":"room","text":"t","customType":"a\"b"}"#,
        ]
        for json in accepted {
            #expect(Self.agree(json), "fast path should take \(json)")
        }
        // Frames made by the general encoder (what the SDK's JSON fallback sends).
        let frames = [
            Frame(type: .publish, id: 42, channel: "room", text: "héllo\n\"x\"/y", customType: "chat", msgId: 77),
            Frame(type: .publish, id: 1, channel: "c", data: Data([0, 255, 7, 63, 62, 251])),
        ]
        for frame in frames {
            #expect(Self.agree(FrameCodec.encode(frame)), "fast path should take the encoder's \(String(buffer: FrameCodec.encode(frame)))")
        }
        // A plain ASCII text is a slice of the frame (no copy).
        let buffer = ByteBuffer(string: #"{"type":"publish","id":3,"channel":"room","text":"hello"}"#)
        let fast = FrameCodec.readPublish(buffer)
        #expect(fast.map { String(buffer: $0.payload) } == "hello")
    }

    @Test("Anything the fast path is unsure of is left to the general decoder (nil), never read differently")
    func defersTheRest() {
        let deferred = [
            #"{"type":"publish","id":3,"channel":"room","text":"\u0041"}"#,            // \u escape
            #"{"type":"publish","id":3,"channel":"room","text":"x","storeInHistory":true}"#,
            #"{"type":"publish","id":3,"channel":"room","text":"x","extra":1}"#,        // unknown key
            #"{"type":"publish","id":3,"id":4,"channel":"room","text":"x"}"#,          // repeated key
            #"{"type":"publish","id":3,"channel":"room","text":"x","text":"y"}"#,
            #"{"type":"publish","id":3,"channel":"room","text":"x","data":"AA=="}"#,    // both payloads
            #"{"type":"publish","id":3,"channel":"room"}"#,                           // no payload
            #"{"type":"publish","channel":"room","text":"x"}"#,                       // no id
            #"{"type":"publish","id":3,"text":"x"}"#,                                 // no channel
            #"{"type":"subscribe","id":3,"channel":"room"}"#,
            #"{"type":"publish","id":-3,"channel":"room","text":"x"}"#,
            #"{"type":"publish","id":03,"channel":"room","text":"x"}"#,
            #"{"type":"publish","id":3.0,"channel":"room","text":"x"}"#,
            #"{"type":"publish","id":3e2,"channel":"room","text":"x"}"#,
            #"{"type":"publish","id":9223372036854775808,"channel":"room","text":"x"}"#,
            #"{"type":"publish","id":99999999999999999999,"channel":"room","text":"x"}"#,
            #"{"type":"publish","id":"3","channel":"room","text":"x"}"#,
            #"{"type":"publish","id":3,"channel":null,"text":"x"}"#,
            #"{"type":"publish","id":3,"channel":"room","text":"x","customType":null}"#,
            #"{"type":"publish","id":3,"channel":"room","text":"x"} x"#,               // trailing bytes
            #"{"type":"publish","id":3,"channel":"room","text":"x",}"#,
            #"{"type":"publish","id":3,"channel":"room","text":"x""#,
            #"{"type":"publish","id":3,"channel":"ro\"om","text":"x"}"#,              // escaped channel
            #"{"type":"publish","id":3,"channel":"salle-é","text":"x"}"#,              // non-ASCII channel
            #"{"type":"publish","id":3,"channel":"room","data":"%%%"}"#,               // bad base64
            #"{"typ\u0065":"publish","id":3,"channel":"room","text":"x"}"#,
            #"{"type":"pub\/lish","id":3,"channel":"room","text":"x"}"#,
            "{\"type\":\"publish\",\"id\":3,\"channel\":\"room\",\"text\":\"a\u{01}b\"}",   // raw control character
            "[1]", "", "{}", "{\"type\":\"publish\"}",
        ]
        for json in deferred {
            #expect(FrameCodec.readPublish(ByteBuffer(string: json)) == nil, "fast path should leave \(json) to the decoder")
        }
        // Invalid UTF-8 in the text.
        var invalid = ByteBuffer(string: #"{"type":"publish","id":3,"channel":"room","text":""#)
        invalid.writeBytes([0xC3, 0x28])
        invalid.writeString(#""}"#)
        #expect(FrameCodec.readPublish(invalid) == nil)
    }

    @Test("Fuzz: every single-byte change, deletion and truncation of publish frames is either read as the decoder reads it, or left to the decoder")
    func mutations() {
        let seeds = [
            #"{"type":"publish","id":31,"channel":"room","msgId":7,"text":"a\"b\\c/é","customType":"t"}"#,
            #"{"channel":"c","data":"AP8H","id":9,"type":"publish"}"#,
        ]
        let replacements = Array(#"{}[]":,\ 0189-.eEabnrtuxé"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xFF]
        var taken = 0
        for seed in seeds {
            let bytes = Array(seed.utf8)
            for i in 0..<bytes.count {
                for replacement in replacements where replacement != bytes[i] {
                    var mutated = bytes
                    mutated[i] = replacement
                    if Self.agree(ByteBuffer(bytes: mutated)) { taken += 1 }
                }
                var deleted = bytes
                deleted.remove(at: i)
                if Self.agree(ByteBuffer(bytes: deleted)) { taken += 1 }
                if Self.agree(ByteBuffer(bytes: bytes[..<i])) { taken += 1 }
            }
        }
        #expect(taken > 100, "the fast path should still take many harmless variants (\(taken))")
    }

    @Test("Long texts (read eight bytes at a time): a quote, backslash, control, DEL or non-ASCII byte at any position is seen")
    func longTexts() {
        let specials: [[UInt8]] = [[0x5C, 0x22], [0x5C, 0x6E], [0x5C, 0x75, 0x30, 0x30, 0x34, 0x31], [0x01], [0x1F], [0x7F], [0xC3, 0xA9], [0xC3], [0x22], [0x20]]
        var taken = 0
        for length in [7, 8, 9, 16, 23, 24, 33] {
            for position in 0...length {
                for special in specials {
                    var text = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    text.insert(contentsOf: special, at: position)
                    var frame = ByteBuffer(string: #"{"type":"publish","id":1,"channel":"room","text":""#)
                    frame.writeBytes(text)
                    frame.writeString(#""}"#)
                    if Self.agree(frame) { taken += 1 }
                }
            }
        }
        #expect(taken > 500)
    }

    @Test("M-2: the publish reply written by hand, with or without its channel epoch, has the general encoder's bytes")
    func okReply() throws {
        for (id, seq) in [(UInt64(0), UInt64(0)), (7, 300), (9, 10), (123_456_789, 9_876_543_210), (UInt64(Int64.max), UInt64.max)] {
            for epoch in [nil, "e-1", "k3f9.2", "", "odd \"/\\ é\n"] {
                var buffer = ByteBuffer()
                FrameCodec.writePublishOK(id: id, seq: seq, epoch: epoch, into: &buffer)
                #expect(String(buffer: buffer) == String(buffer: FrameCodec.encode(Frame(type: .ok, id: id, seq: seq, epoch: epoch))))
                #expect(buffer.readableBytes == FrameCodec.publishOKLength(id: id, seq: seq, epoch: epoch))
                if seq <= UInt64(Int64.max) { #expect(try FrameCodec.decode(buffer).epoch == epoch) }   // the decoder's range
            }
        }
    }

    @Test("Decimals written by hand (digit count from the bit length, two digits per step) are Swift's, at every power of ten and its neighbours")
    func decimals() {
        var values: [UInt64] = [0, 1, 9, UInt64(Int64.max), UInt64.max, UInt64.max - 1]
        var power: UInt64 = 1
        for _ in 0...19 {
            values += [power - 1, power, power + 1]
            if power > UInt64.max / 10 { break }
            power *= 10
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 { values.append(random.next() >> UInt64.random(in: 0...63)) }
        for value in values {
            var buffer = ByteBuffer()
            FrameCodec.writeDecimal(value, into: &buffer)
            #expect(String(buffer: buffer) == String(value))
            #expect(FrameCodec.decimalDigits(value) == String(value).count, "digits of \(value)")
        }
    }

    @Test("Ids and msgIds of every length (read eight digits at a time) are read as the decoder reads them, up to Int64.max; longer or larger ones are left to it")
    func numbers() {
        for digits in 1...20 {
            for first in ["1", "9"] {
                let number = first + String(repeating: "7", count: digits - 1)
                let json = #"{"type":"publish","id":"# + number + #","msgId":"# + number + #","channel":"room","text":"t"}"#
                let fast = FrameCodec.readPublish(ByteBuffer(string: json))
                if let value = UInt64(number), value <= UInt64(Int64.max) {
                    #expect(fast?.requestID == value && fast?.msgId == value, "\(number)")
                    Self.agree(json)
                } else {
                    #expect(fast == nil, "\(number)")
                }
            }
        }
        #expect(FrameCodec.readPublish(ByteBuffer(string: #"{"type":"publish","id":9223372036854775807,"channel":"c","text":"t"}"#))?.requestID == UInt64(Int64.max))
        #expect(FrameCodec.readPublish(ByteBuffer(string: #"{"type":"publish","id":9223372036854775808,"channel":"c","text":"t"}"#)) == nil)
        // Eight-digit words: every byte must be a digit.
        for _ in 0..<1_000 {
            let value = UInt64.random(in: 0..<100_000_000)
            var text = String(value)
            text = String(repeating: "0", count: 8 - text.count) + text
            let word = Array(text.utf8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            #expect(PublishScanner.eightDigits(UInt64(littleEndian: word)) == value)
            var bytes = Array(text.utf8)
            bytes[Int.random(in: 0..<8)] = [0x2F, 0x3A, 0x20, 0x00, 0xB0, 0x39 + 6, 0x30 - 1].randomElement()!
            let broken = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            #expect(PublishScanner.eightDigits(UInt64(littleEndian: broken)) == nil, "\(bytes)")
        }
    }

    @Test("The error reply written by hand has the general encoder's bytes")
    func errorReply() {
        var awkward = "tab\there, slash / quote \" backslash \\ é 中 \u{1F600}"
        for byte in UInt8(0)..<0x20 { awkward.unicodeScalars.append(Unicode.Scalar(byte)) }
        let reasons = ["more than 60 messages per second", "", awkward, "line\nbreak\r\u{08}\u{0C}"]
        for reason in reasons {
            for id in [nil, UInt64(0), 42, UInt64.max] {
                for code in [RTMErrorCode.channelPublishMessageTooFrequent, .invalidChannelName, .channelMessageLengthExceedLimitation] {
                    var buffer = ByteBuffer()
                    FrameCodec.writeError(id: id, code: code.rawValue, reason: reason, into: &buffer)
                    #expect(String(buffer: buffer) == String(buffer: FrameCodec.encode(.error(id: id, code, reason))), "reason \(reason.debugDescription)")
                    #expect(buffer.readableBytes == FrameCodec.errorLength(id: id, code: code.rawValue, reason: reason))
                }
            }
        }
    }
}
