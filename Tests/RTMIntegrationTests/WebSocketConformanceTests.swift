import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import NIOWebSocket
import RTMTestSupport
import RTMWebSocket
import Testing
@testable import RTMClient

/// RFC 6455 to the letter: the shared rules (`RTMWebSocket`), the SDK's side of
/// them, and the real server answering violations and close frames over TCP.
@Suite(.realTime)
struct WebSocketRulesTests {
    /// Valid UTF-8 is what round-trips through the standard library's repairing decoder.
    static func reference(_ bytes: [UInt8]) -> Bool {
        Array(String(decoding: bytes, as: UTF8.self).utf8) == bytes
    }

    @Test("UTF8Validator agrees with the standard library on edge cases and random bytes, whole and fed in two pieces")
    func utf8MatchesReference() {
        var cases: [[UInt8]] = [
            [], Array("hello, world: more than eight ASCII bytes".utf8), Array("κόσμε €𝄞".utf8),
            [0x7F], [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEF, 0xBF, 0xBF],
            [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
            [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x9F, 0xBF], [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],
            [0xF0, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFE], [0xFF],
            [0xE2, 0x82], [0xF0, 0x90, 0x80], [0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0xC3],
        ]
        let alphabet: [UInt8] = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
        for _ in 0..<5000 {
            cases.append((0..<Int.random(in: 1...12)).map { _ in Bool.random() ? alphabet.randomElement()! : UInt8.random(in: 0...255) })
        }
        for bytes in cases {
            let expected = Self.reference(bytes)
            #expect(UTF8Validator.isValid(ByteBuffer(bytes: bytes)) == expected, "\(bytes)")
            let cut = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count)
            var validator = UTF8Validator()
            let fed = bytes[..<cut].withUnsafeBytes { validator.feed($0) } && bytes[cut...].withUnsafeBytes { validator.feed($0) }
            #expect((fed && validator.isComplete) == expected, "\(bytes) cut at \(cut)")
        }
    }

    @Test("Close codes a peer may send: 1000–1003, 1007–1014, 3000–4999 (RFC 6455 §7.4)")
    func closeCodes() {
        let valid = (0...UInt16.max).filter(WebSocketRules.isValidCloseCode)
        #expect(valid == Array(1000...1003) + Array(1007...1014) + Array(3000...4999))
    }
}

/// The SDK's side: `ClientMessageAggregator` and `WebSocketViolationHandler` behind NIO's
/// decoder, as `ClientTransport` runs them.
@Suite(.realTime)
struct ClientWebSocketRulesTests {
    /// A server frame (unmasked unless `key` is given).
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, key: [UInt8]? = nil, rsv: UInt8 = 0) -> ByteBuffer {
        JSONPublishTests.clientFrame(opcode, payload, fin: fin, key: key, rsv: rsv)
    }

    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(WebSocketFrameEncoder())
        try sync.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 16)))
        try sync.addHandler(ClientMessageAggregator(maxFrameSize: 1 << 16))
        try sync.addHandler(WebSocketViolationHandler(isServer: false))
        try sync.addHandler(ClientFrameHandler(onFrame: { _, _ in }))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()   // active, so a close shows
        return channel
    }

    /// The close frame the client sends after `input` (its code, nil if none); it must be
    /// masked, and the connection closed after it.
    static func answer(_ input: ByteBuffer) throws -> Int? {
        let channel = try channel()
        try channel.writeInbound(input)
        var out = ByteBuffer()
        while var part = try channel.readOutbound(as: ByteBuffer.self) { out.writeBuffer(&part) }
        guard let b0: UInt8 = out.readInteger(), b0 == 0x88, let b1: UInt8 = out.readInteger(), b1 & 0x80 != 0,
              let key = out.readBytes(length: 4), var payload = out.readSlice(length: Int(b1 & 0x7F)) else {
            _ = try? channel.finish()
            return nil
        }
        payload.webSocketUnmask(WebSocketMaskingKey(key)!)
        #expect(!channel.isActive, "closed after the close frame")
        return payload.readInteger(as: UInt16.self).map(Int.init)
    }

    @Test("The SDK answers violations by the server with a masked close frame: 1002 for masked frames (RFC 6455 §5.1), reserved bits, unknown opcodes, bad fragments, bad close frames; 1007 for invalid UTF-8")
    func clientViolations() throws {
        #expect(try Self.answer(Self.frame(0x1, Array("hi".utf8), key: [1, 2, 3, 4])) == 1002)
        #expect(try Self.answer(Self.frame(0x2, [1], rsv: 0x40)) == 1002)
        #expect(try Self.answer(Self.frame(0x3, [1])) == 1002)
        #expect(try Self.answer(Self.frame(0x0, [1])) == 1002)
        var twoStarts = Self.frame(0x1, [0x61], fin: false)
        twoStarts.writeImmutableBuffer(Self.frame(0x1, [0x62]))
        #expect(try Self.answer(twoStarts) == 1002)
        #expect(try Self.answer(Self.frame(0x8, [0x03])) == 1002)
        #expect(try Self.answer(Self.frame(0x8, [0x03, 0xED])) == 1002)   // 1005
        #expect(try Self.answer(Self.frame(0x8, [0x03, 0xE8, 0xFF])) == 1002)
        #expect(try Self.answer(Self.frame(0x1, [0xCE, 0xBA, 0xED, 0xA0, 0x80])) == 1007)
        var cut = Self.frame(0x1, [0xE2], fin: false)
        cut.writeImmutableBuffer(Self.frame(0x0, [0x82]))
        #expect(try Self.answer(cut) == 1007)
    }

    @Test("The SDK echoes a valid close frame's code (RFC 6455 §5.5.1), 1000 for an empty one, then closes")
    func clientEchoesClose() throws {
        #expect(try Self.answer(Self.frame(0x8, [0x0B, 0xB8] + Array("bye".utf8))) == 3000)
        #expect(try Self.answer(Self.frame(0x8, [0x03, 0xE9])) == 1001)
        #expect(try Self.answer(Self.frame(0x8, [])) == 1000)
    }
}

/// The real server over TCP: close frames before the TCP close.
@Suite(.realTime, .serialized)
struct ServerCloseHandshakeTests {
    /// Upgrades a raw connection to the real server, sends `frames`, and returns the close
    /// code of the server's close frame, once the server has closed the connection.
    static func closeCode(after frames: ByteBuffer) async throws -> Int? {
        let harness = try await Harness.start()
        let (channel, collector) = try await PipelinedUpgradeTests.connect(port: harness.port)
        var bytes = PipelinedUpgradeTests.upgradeRequest
        bytes.writeImmutableBuffer(frames)
        try await channel.writeAndFlush(bytes)
        // The server closes the connection itself (RFC 6455 §7.1.1); waiting on that is the test.
        let closed = await withDeadline(soon) { try await channel.closeFuture.get(); return true }
        try? await channel.close()
        await harness.stop()
        #expect(closed == true, "the server closed the connection")
        let received = Array(collector.received.withLockedValue { $0 }.readableBytesView)
        let headEnd: [UInt8] = [13, 10, 13, 10]
        guard let end = received.indices.first(where: { received[$0...].starts(with: headEnd) }) else { return nil }
        var frame = ByteBuffer(bytes: received[(end + 4)...])
        guard let b0: UInt8 = frame.readInteger(), b0 == 0x88, let b1: UInt8 = frame.readInteger(), b1 >= 2 else { return nil }
        return frame.readInteger(as: UInt16.self).map(Int.init)
    }

    @Test("The server echoes a client's close code, then closes (RFC 6455 §5.5.1); it answers violations with 1002, 1007, 1009 before closing")
    func closeCodesOverTCP() async throws {
        let frame = JSONPublishTests.clientFrame
        #expect(try await Self.closeCode(after: frame(0x8, [0x0F, 0xA0] + Array("going".utf8), true, [9, 9, 9, 9], 0)) == 4000)
        #expect(try await Self.closeCode(after: frame(0x8, [], true, [1, 2, 3, 4], 0)) == 1000)
        #expect(try await Self.closeCode(after: frame(0x8, [0x03, 0xEC], true, [1, 2, 3, 4], 0)) == 1002)   // 1004
        #expect(try await Self.closeCode(after: frame(0x1, Array("{}".utf8), true, nil, 0)) == 1002)   // unmasked
        #expect(try await Self.closeCode(after: frame(0x2, [1], true, [1, 2, 3, 4], 0x20)) == 1002)
        #expect(try await Self.closeCode(after: frame(0x1, [0xC0, 0x80], true, [1, 2, 3, 4], 0)) == 1007)
        #expect(try await Self.closeCode(after: frame(0x2, [UInt8](repeating: 0, count: 70_000), true, [1, 2, 3, 4], 0)) == 1009)
    }
}
