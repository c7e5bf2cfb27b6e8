import NIOCore
import NIOWebSocket
import RTMProtocol
@testable import RTMServer
import Testing

/// Frames the mailbox encodes whole (header in front of the body, one buffer), as the frame
/// encoder would have written them.
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
}
