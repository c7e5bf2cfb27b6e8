import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOEmbedded
import NIOWebSocket
import Testing
@testable import RTMServer

/// The server's WebSocket frame decoder (RFC 6455 §5) on an embedded channel: masks, batches,
/// fragments, split reads and every rejected violation.
struct ServerFrameDecoderTests {
    /// A client frame: masked with `key` (nil: unmasked).
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, key: [UInt8]? = [1, 2, 3, 4], rsv: UInt8 = 0) -> ByteBuffer {
        var out = ByteBuffer()
        out.writeInteger((fin ? 0x80 : 0) | rsv | opcode)
        let maskBit: UInt8 = key == nil ? 0 : 0x80
        if payload.count < 126 {
            out.writeInteger(maskBit | UInt8(payload.count))
        } else if payload.count <= Int(UInt16.max) {
            out.writeInteger(maskBit | 126)
            out.writeInteger(UInt16(payload.count))
        } else {
            out.writeInteger(maskBit | 127)
            out.writeInteger(UInt64(payload.count))
        }
        var body = ByteBuffer(bytes: payload)
        if let key {
            out.writeBytes(key)
            body.webSocketMask(WebSocketMaskingKey(key)!)
        }
        out.writeBuffer(&body)
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
            case .binary(let messages): out.append("binary[" + messages.map { String(buffer: $0) }.joined(separator: ",") + "]")
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

    @Test("Binary messages of one read come as one batch, unmasked; a text frame between them keeps the order")
    func batchesInOrder() throws {
        let channel = try Self.channel()
        var input = Self.frame(0x2, Array("one".utf8))
        input.writeImmutableBuffer(Self.frame(0x2, Array("two".utf8), key: [0, 0, 0, 0]))
        input.writeImmutableBuffer(Self.frame(0x1, Array("{\"type\":\"ping\"}".utf8), key: [9, 8, 7, 6]))
        input.writeImmutableBuffer(Self.frame(0x2, Array("three".utf8), key: nil))
        try channel.writeInbound(input)
        #expect(try Self.reads(channel) == ["binary[one,two]", "text:{\"type\":\"ping\"}", "binary[three]"])
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
        #expect(try Self.reads(channel) == ["binary[" + String(repeating: "a", count: 300) + "]"])
    }

    @Test("Fragmented messages are reassembled; control frames may come between the fragments")
    func fragments() throws {
        let channel = try Self.channel()
        var input = Self.frame(0x1, Array("hel".utf8), fin: false)
        input.writeImmutableBuffer(Self.frame(0x9, Array("p".utf8)))
        input.writeImmutableBuffer(Self.frame(0x0, Array("lo ".utf8), fin: false, key: [5, 6, 7, 8]))
        input.writeImmutableBuffer(Self.frame(0x0, Array("world".utf8)))
        try channel.writeInbound(input)
        #expect(try Self.reads(channel) == ["ping:p", "text:hello world"])
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

    @Test("Masked frames decode in linear time: 1,000 pipelined masked frames in one read share one copy of the read at most (issue 11)")
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
            case .binary(let messages):
                payloads += messages
                texts += messages.map { String(buffer: $0) }
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

    @Test("Violations are rejected: oversize, long or fragmented control frames, reserved bits, unknown opcode, bad fragment sequences")
    func violations() throws {
        func rejects(_ input: ByteBuffer, maxFrameSize: Int = 1 << 16) throws -> String? {
            let channel = try Self.channel(maxFrameSize: maxFrameSize)
            do {
                try channel.writeInbound(input)
                _ = try? channel.finish()
                return nil
            } catch let error as NIOWebSocketError {
                return "\(error)"
            } catch let error as WebSocketViolation {
                return error.description
            }
        }
        #expect(try rejects(Self.frame(0x2, [UInt8](repeating: 1, count: 200)), maxFrameSize: 100) == "invalidFrameLength")
        #expect(try rejects(Self.frame(0x9, [UInt8](repeating: 1, count: 126))) == "multiByteControlFrameLength")
        #expect(try rejects(Self.frame(0x9, [1], fin: false)) == "fragmentedControlFrame")
        #expect(try rejects(Self.frame(0x2, [1], rsv: 0x40))?.contains("reserved bits") == true)
        #expect(try rejects(Self.frame(0x3, [1]))?.contains("opcode 3") == true)
        #expect(try rejects(Self.frame(0x0, [1]))?.contains("continuation") == true)
        var twoStarts = Self.frame(0x1, [1], fin: false)
        twoStarts.writeImmutableBuffer(Self.frame(0x2, [2]))
        #expect(try rejects(twoStarts)?.contains("new message") == true)
        var tooLong = Self.frame(0x2, [UInt8](repeating: 1, count: 60), fin: false)
        tooLong.writeImmutableBuffer(Self.frame(0x0, [UInt8](repeating: 1, count: 60)))
        #expect(try rejects(tooLong, maxFrameSize: 100) == "invalidFrameLength")
    }
}

/// Frames sent right behind the upgrade request, in the same write, are read (not lost, no crash).
@Suite(.serialized)
struct PipelinedUpgradeTests {
    final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let received = NIOLockedValueBox(ByteBuffer())
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            received.withLockedValue { _ = $0.writeBuffer(&bytes) }
        }
    }

    @Test("An upgrade request and a ping frame in one TCP write: the server upgrades, then answers the ping")
    func pipelinedFrame() async throws {
        let harness = try await Harness.start()
        let collector = Collector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) } }
            .connect(host: "127.0.0.1", port: harness.port).get()
        var bytes = ByteBuffer(string: "GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: rtm.v1\r\n\r\n")
        bytes.writeImmutableBuffer(ServerFrameDecoderTests.frame(0x1, Array("{\"type\":\"ping\",\"ts\":7}".utf8)))
        try await channel.writeAndFlush(bytes)
        let deadline = ContinuousClock.now + soon
        var text = ""
        while ContinuousClock.now < deadline {
            text = collector.received.withLockedValue { String(buffer: $0) }
            if text.contains("pong") { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(text.hasPrefix("HTTP/1.1 101"))
        #expect(text.contains("\"type\":\"pong\""))
        try? await channel.close()
        await harness.stop()
    }
}
