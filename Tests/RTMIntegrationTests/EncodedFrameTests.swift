import NIOCore
import NIOWebSocket
import RTMProtocol
@testable import RTMServer
import RTMTestSupport
import Testing

/// Frames the mailbox encodes whole (header in front of the body, one buffer), as the frame
/// encoder would have written them.
@Suite(.realTime)
struct EncodedFrameTests {
    @Test("EncodedFrame: the header (each length form, at its boundaries) and body are the bytes of the same frame written the usual way; the pipeline form carries the body")
    func sameBytes() {
        for size in [0, 1, 125, 126, 127, 65_535, 65_536, 70_000] {
            let body = ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let frame = EncodedFrame.binary(allocator: ByteBufferAllocator(), capacity: 3) { $0.writeImmutableBuffer(body) }
            var expected = ByteBuffer()
            BinaryFrame.writeWebSocketHeader(into: &expected, length: size, opcode: 0x2)
            expected.writeImmutableBuffer(body)
            #expect(frame.buffer == expected, "size \(size)")
            #expect(frame.payloadBytes == size)
            let pipelineForm = frame.webSocketFrame
            #expect(pipelineForm.fin && pipelineForm.opcode == .binary && pipelineForm.data == body, "size \(size)")
        }
    }

    @Test("EncodedFrame: a text frame (JSON deliveries) has the text opcode in its header and its pipeline form")
    func textFrame() {
        let json = ByteBuffer(string: #"{"type":"message","text":"ünï"}"#)
        let frame = EncodedFrame.text(json, allocator: ByteBufferAllocator())
        var expected = ByteBuffer()
        BinaryFrame.writeWebSocketHeader(into: &expected, length: json.readableBytes, opcode: 0x1)
        expected.writeImmutableBuffer(json)
        #expect(frame.buffer == expected)
        #expect(frame.webSocketFrame.opcode == .text && frame.webSocketFrame.data == json)
    }

    @Test("T-2, RFC 6455 §5.5.1: pre-encoded frames (user-message replies and deliveries) reach the client until the server closes the connection; one written while the close frame still waits to go out is dropped, not sent after it")
    func nothingAfterTheCloseFrame() async throws {
        let harness = try await Harness.start()
        let client = try await JSONPublishTests.RawClient(port: harness.port)
        let login = Frame(type: .login, id: 1, appId: Harness.appId, userId: "bob", token: Harness.token("bob"), heartbeatInterval: 5)
        try await client.send([JSONPublishTests.text(String(buffer: FrameCodec.encode(login)))])
        _ = try await client.waitFor { $0.contains { String(buffer: $0.payload).contains(#""id":1"#) } }
        let connection = try #require(harness.server.hub.connection(of: UserKey(appId: Harness.appId, userId: "bob")))
        // The client stops reading, so that what follows piles up in the server's socket and the
        // close frame is still waiting when the last frame is written.
        try await client.channel.setOption(ChannelOptions.autoRead, value: false).get()
        let chunk = String(repeating: "x", count: 60_000)
        try await connection.channel.eventLoop.submit {
            func write(_ text: String) {
                let frame = EncodedFrame.binary(allocator: connection.channel.allocator, capacity: text.utf8.count) { $0.writeString(text) }
                connection.writeEncoded(frame.buffer, fallback: frame.webSocketFrame)
            }
            for _ in 0..<100 { write(chunk) }   // 6 MB: more than the socket buffers hold
            write("before")
            connection.channel.flush()
            connection.channel.pipeline.fireUserInboundEventTriggered(
                CloseWithFrameEvent(frame: WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "{}")), code: .normalClosure, reason: "test"))
            write("after")
            connection.channel.flush()
        }.get()
        try await client.channel.setOption(ChannelOptions.autoRead, value: true).get()
        client.channel.read()
        try await connection.channel.closeFuture.get()   // everything the server sent is out
        let all = try await client.waitFor { $0.contains { $0.opcode == 0x8 } }
        let payloads = all.map { String(buffer: $0.payload) }
        #expect(payloads.filter { $0 == chunk }.count == 100 && payloads.contains("before"))
        #expect(!payloads.contains("after"))
        #expect(all.last?.opcode == 0x8, "the close frame is the last one sent")
    }
}
