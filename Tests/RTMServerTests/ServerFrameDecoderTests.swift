import NIOCore
import NIOEmbedded
import NIOWebSocket
import RTMTestSupport
import Testing
@testable import RTMServer
import RTMWebSocket

/// The server's WebSocket frame decoder (RFC 6455 §5) on an embedded channel: masks, batches,
/// fragments, split reads and every rejected violation.
struct ServerFrameDecoderTests {
    /// A client frame: masked with `key` (nil: unmasked).
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, key: [UInt8]? = [1, 2, 3, 4], rsv: UInt8 = 0) -> ByteBuffer {
        var out = ByteBuffer()
        RawPeer.appendFrame(to: &out, opcode: opcode, payload, fin: fin, masked: key != nil, key: key, rsv: rsv)
        return out
    }

    static func channel(maxFrameSize: Int = 1 << 16) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: maxFrameSize)))
        return channel
    }

    static func reads(_ channel: EmbeddedChannel) throws -> [String] {
        var out: [String] = []
        while let item = try channel.readInbound(as: ServerInbound.self) {
            switch item {
            case .messages(let messages):
                out.append("batch[" + messages.map { ($0.isText ? "text:" : "") + String(buffer: $0.data) }.joined(separator: ",") + "]")
            case .frame(let f):
                let name = switch f.opcode {
                case .text: "text"
                case .ping: "ping"
                case .pong: "pong"
                case .connectionClose: "close"
                default: "other"
                }
                out.append("\(name):\(String(buffer: f.data))")
            }
        }
        return out
    }

    @Test("Text and binary messages of one read come as one batch, unmasked, in order; a control frame between them keeps the order")
    func batchesInOrder() throws {
        let channel = try Self.channel()
        var input = Self.frame(0x2, Array("one".utf8))
        input.writeImmutableBuffer(Self.frame(0x2, Array("two".utf8), key: [0, 0, 0, 0]))
        input.writeImmutableBuffer(Self.frame(0x9, Array("p".utf8), key: [5, 5, 5, 5]))
        input.writeImmutableBuffer(Self.frame(0x1, Array("{\"type\":\"ping\"}".utf8), key: [9, 8, 7, 6]))
        input.writeImmutableBuffer(Self.frame(0x2, Array("three".utf8), key: [0, 0, 0, 1]))
        input.writeImmutableBuffer(Self.frame(0x1, Array("four".utf8), key: [1, 0, 0, 1]))
        try channel.writeInbound(input)
        #expect(try Self.reads(channel) == ["batch[one,two]", "ping:p", "batch[text:{\"type\":\"ping\"},three,text:four]"])
        #expect(try channel.finish().isClean)
    }

    @Test("A frame split across reads (header, 16-bit length, payload) waits for its bytes")
    func splitReads() throws {
        let channel = try Self.channel()
        let payload = [UInt8](repeating: 0x61, count: 300)
        var whole = Self.frame(0x2, payload, key: [0xde, 0xad, 0xbe, 0xef])
        for size in [1, 2, 3, 100] {
            let part = whole.readSlice(length: size)!
            try channel.writeInbound(part)
            #expect(try Self.reads(channel).isEmpty)
        }
        try channel.writeInbound(whole)
        #expect(try Self.reads(channel) == ["batch[" + String(repeating: "a", count: 300) + "]"])
    }

    @Test("Fragmented messages are reassembled; control frames may come between the fragments")
    func fragments() throws {
        let channel = try Self.channel()
        var input = Self.frame(0x1, Array("hel".utf8), fin: false)
        input.writeImmutableBuffer(Self.frame(0x9, Array("p".utf8)))
        input.writeImmutableBuffer(Self.frame(0x0, Array("lo ".utf8), fin: false, key: [5, 6, 7, 8]))
        input.writeImmutableBuffer(Self.frame(0x0, Array("world".utf8)))
        try channel.writeInbound(input)
        #expect(try Self.reads(channel) == ["ping:p", "batch[text:hello world]"])
    }

    @Test("Unmasking eight bytes at a time equals RFC 6455 byte-wise unmasking at every length")
    func unmaskMatchesReference() {
        for length in 0..<40 {
            let key = (0..<4).map { _ in UInt8.random(in: 0...255) }
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255) }
            var ours = ByteBuffer(bytes: bytes)
            var reference = ours
            let wireKey = UInt32(key[0]) | UInt32(key[1]) << 8 | UInt32(key[2]) << 16 | UInt32(key[3]) << 24
            ours.withUnsafeMutableReadableBytes { ServerFrameDecoder.unmask($0.baseAddress!, length: length, key: wireKey) }
            reference.webSocketUnmask(WebSocketMaskingKey(key)!)
            #expect(ours == reference, "length \(length)")
        }
    }

    /// Where a payload's bytes lie: its storage address range (to count copies of the read).
    static func address(_ buffer: ByteBuffer) -> ClosedRange<UInt> {
        buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) ... UInt(bitPattern: $0.baseAddress) + UInt($0.count) }
    }

    @Test("Masked frames decode in linear time: 1,000 pipelined masked frames in one read share one copy of the read at most")
    func maskedFramesAreNotCopiedPerFrame() throws {
        // The old decoder unmasked each frame in the read buffer after earlier frames' payloads
        // had been sliced from it, so every masked frame copied the whole buffer (quadratic).
        // Count copies by where the payloads live: if the read was never copied per frame, all
        // 1,000 payloads (and the control frames' and fragments' bytes) lie inside one span of
        // memory no longer than the read itself; a copy per frame scatters them over 1,000
        // allocations.
        let channel = try Self.channel()
        var input = ByteBuffer()
        var expected: [String] = []
        for i in 0..<1000 {
            let key = (0..<4).map { _ in UInt8.random(in: 1...255) }   // random per frame, as RFC 6455 asks
            let text = "publish-\(i)"
            input.writeImmutableBuffer(Self.frame(0x2, Array(text.utf8), key: key))
            expected.append(text)
            if i % 100 == 50 {   // a ping and a fragmented binary message among them
                input.writeImmutableBuffer(Self.frame(0x9, Array("p\(i)".utf8), key: key))
                input.writeImmutableBuffer(Self.frame(0x2, Array("frag-".utf8), fin: false, key: key))
                input.writeImmutableBuffer(Self.frame(0x0, Array("\(i)".utf8), key: key.reversed()))
            }
        }
        let readSize = UInt(input.readableBytes)
        try channel.writeInbound(input)
        input = ByteBuffer()   // the test keeps no reference to the read's storage
        var payloads: [ByteBuffer] = []
        var texts: [String] = []
        while let item = try channel.readInbound(as: ServerInbound.self) {
            switch item {
            case .messages(let messages):
                payloads += messages.map(\.data)
                texts += messages.map { String(buffer: $0.data) }
            case .frame(let frame):
                payloads.append(frame.data)
            }
        }
        #expect(texts.filter { !$0.hasPrefix("frag-") } == expected)
        #expect(texts.filter { $0.hasPrefix("frag-") }.count == 10)
        // Reassembled fragments are one new buffer each (10 of them); everything else must be
        // in place.
        let inPlace = payloads.filter { !String(buffer: $0).hasPrefix("frag-") }.map(Self.address)
        let low = inPlace.map(\.lowerBound).min()!, high = inPlace.map(\.upperBound).max()!
        #expect(high - low <= readSize, "payloads spread over \(high - low) bytes for a \(readSize)-byte read: the read was copied per frame")
        #expect(try channel.finish().isClean)
    }

    /// The decoder behind the violation handler, as the server runs them: what goes out is
    /// encoded frames.
    static func answeringChannel(maxFrameSize: Int = 1 << 16) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: maxFrameSize)))
        try channel.pipeline.syncOperations.addHandler(WebSocketViolationHandler(isServer: true))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()   // active, so a close shows
        return channel
    }

    /// The close code the server answers `input` with, nil if it sends no close frame; the
    /// connection must be closed right after a close frame.
    static func answer(_ input: ByteBuffer, maxFrameSize: Int = 1 << 16) throws -> Int? {
        let channel = try answeringChannel(maxFrameSize: maxFrameSize)
        try channel.writeInbound(input)
        var out = ByteBuffer()
        while var part = try channel.readOutbound(as: ByteBuffer.self) { out.writeBuffer(&part) }
        guard let b0: UInt8 = out.readInteger(), b0 == 0x88, let b1: UInt8 = out.readInteger(), b1 & 0x80 == 0,
              b1 >= 2, let code: UInt16 = out.readInteger() else {
            _ = try? channel.finish()
            return nil
        }
        #expect(!channel.isActive, "closed after the close frame")
        return Int(code)
    }

    @Test("Violations are answered with a close frame, then closed: 1009 for too big, 1002 for long or fragmented control frames, reserved bits, unknown opcodes, bad fragment sequences, more than 64 fragments")
    func violations() throws {
        #expect(try Self.answer(Self.frame(0x2, [UInt8](repeating: 1, count: 200)), maxFrameSize: 100) == 1009)
        #expect(try Self.answer(Self.frame(0x9, [UInt8](repeating: 1, count: 126))) == 1002)
        #expect(try Self.answer(Self.frame(0x9, [1], fin: false)) == 1002)
        for rsv: UInt8 in [0x40, 0x20, 0x10] {
            #expect(try Self.answer(Self.frame(0x2, [1], rsv: rsv)) == 1002)
        }
        for opcode: UInt8 in [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            #expect(try Self.answer(Self.frame(opcode, [1])) == 1002, "opcode \(opcode)")
        }
        #expect(try Self.answer(Self.frame(0x0, [1])) == 1002)   // a continuation of nothing
        var twoStarts = Self.frame(0x1, [1], fin: false)
        twoStarts.writeImmutableBuffer(Self.frame(0x2, [2]))
        #expect(try Self.answer(twoStarts) == 1002)
        var tooLong = Self.frame(0x2, [UInt8](repeating: 1, count: 60), fin: false)
        tooLong.writeImmutableBuffer(Self.frame(0x0, [UInt8](repeating: 1, count: 60)))
        #expect(try Self.answer(tooLong, maxFrameSize: 100) == 1009)
        var manyFragments = Self.frame(0x2, [1], fin: false)
        for _ in 0..<64 { manyFragments.writeImmutableBuffer(Self.frame(0x0, [1], fin: false)) }
        #expect(try Self.answer(manyFragments) == 1002)   // 65 fragments
        var sixtyFour = Self.frame(0x2, [1], fin: false)
        for i in 0..<63 { sixtyFour.writeImmutableBuffer(Self.frame(0x0, [1], fin: i == 62)) }
        #expect(try Self.answer(sixtyFour) == nil)
    }

    @Test("RFC 6455 §5.1: an unmasked client frame is refused with 1002; the frames before it are delivered")
    func unmaskedFramesAreRefused() throws {
        #expect(try Self.answer(Self.frame(0x2, Array("x".utf8), key: nil)) == 1002)
        #expect(try Self.answer(Self.frame(0x1, Array("{}".utf8), key: nil)) == 1002)
        #expect(try Self.answer(Self.frame(0x9, [], key: nil)) == 1002)
        let channel = try Self.channel()
        var input = Self.frame(0x2, Array("one".utf8))
        input.writeImmutableBuffer(Self.frame(0x2, Array("two".utf8), key: nil))
        #expect(throws: WebSocketViolation.protocolError("an unmasked frame from a client (RFC 6455 §5.1)")) { try channel.writeInbound(input) }
        #expect(try Self.reads(channel) == ["batch[one]"])
    }

    @Test("RFC 6455 §8.1: a text message that is not UTF-8 is answered with 1007, whole or fragmented; fragments fail at the bad one")
    func invalidUTF8IsRefused() throws {
        let invalid: [[UInt8]] = [[0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x61, 0xE2, 0x82], [0x80]]
        for bytes in invalid {
            #expect(try Self.answer(Self.frame(0x1, bytes)) == 1007, "\(bytes)")
        }
        // Valid pieces, invalid whole: a message ending inside a character.
        var cut = Self.frame(0x1, [0x61], fin: false)
        cut.writeImmutableBuffer(Self.frame(0x0, [0xE2, 0x82]))
        #expect(try Self.answer(cut) == 1007)
        // Fail fast: the second fragment is refused before the message (or the read) ends.
        let channel = try Self.answeringChannel()
        try channel.writeInbound(Self.frame(0x1, Array("κόσμε".utf8), fin: false))
        #expect(channel.isActive)
        try channel.writeInbound(Self.frame(0x0, [0xF4, 0x90, 0x80, 0x80], fin: false))
        #expect(!channel.isActive)
        // A character split across fragments is fine; binary messages are not checked.
        let ok = try Self.channel()
        let euro: [UInt8] = Array("€".utf8)
        var split = Self.frame(0x1, [euro[0]], fin: false)
        split.writeImmutableBuffer(Self.frame(0x0, [euro[1]], fin: false))
        split.writeImmutableBuffer(Self.frame(0x0, [euro[2]]))
        split.writeImmutableBuffer(Self.frame(0x2, [0xFF, 0xFE]))
        try ok.writeInbound(split)
        let reads = try Self.reads(ok)
        #expect(reads.count == 1 && reads[0].hasPrefix("batch[text:€,"), "the text and the binary message in one batch: \(reads)")
    }

    @Test("RFC 6455 §5.5.1/§7.4: close frames with a 1-byte payload, an invalid code or a reason that is not UTF-8 get 1002; valid ones reach the handler and nothing after them does")
    func closePayloads() throws {
        func close(_ code: UInt16?, reason: [UInt8] = []) -> ByteBuffer {
            var payload: [UInt8] = []
            if let code { payload = [UInt8(code >> 8), UInt8(code & 0xFF)] }
            return Self.frame(0x8, payload + reason)
        }
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] {
            #expect(try Self.answer(close(code)) == 1002, "code \(code)")
        }
        #expect(try Self.answer(Self.frame(0x8, [0x03])) == 1002)
        #expect(try Self.answer(close(1000, reason: [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xED, 0xA0, 0x80])) == 1002)
        for code: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999] {
            let channel = try Self.channel()
            var input = close(code, reason: Array("bye κόσμε".utf8))
            input.writeImmutableBuffer(Self.frame(0x1, Array("after".utf8)))
            input.writeImmutableBuffer(Self.frame(0x3, [1]))   // not even read
            try channel.writeInbound(input)
            try channel.writeInbound(Self.frame(0x2, Array("later".utf8)))
            let reads = try Self.reads(channel)
            #expect(reads.count == 1 && reads[0].hasPrefix("close:"), "code \(code): \(reads)")
            #expect(try channel.finish().isClean)
        }
        #expect(WebSocketRules.closeReplyCode(ByteBuffer(bytes: [0x0B, 0xB8, 0x61])) == .unknown(3000))
        #expect(WebSocketRules.closeReplyCode(ByteBuffer()) == .normalClosure)
    }
}
