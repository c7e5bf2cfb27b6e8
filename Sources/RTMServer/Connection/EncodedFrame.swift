import NIOCore
import NIOWebSocket

/// A whole server-to-client WebSocket frame (final, unmasked) in one buffer: the header written in
/// front of the body after the body, so the body is encoded once, in place, and the frame goes
/// to the socket as one piece instead of the frame encoder's separate header and body.
struct EncodedFrame {
    /// Header and body.
    let buffer: ByteBuffer
    /// Where the body starts in `buffer`'s readable bytes.
    private let headerLength: Int
    /// Binary (0x2) or text (0x1).
    private let opcode: UInt8

    /// The longest header: 2 bytes, then a 64-bit length.
    private static let maxHeader = 10

    /// A binary frame whose body `body` appends; `capacity` is the body's expected size.
    static func binary(allocator: ByteBufferAllocator, capacity: Int, _ body: (inout ByteBuffer) -> Void) -> EncodedFrame {
        make(opcode: 0x2, allocator: allocator, capacity: capacity, body)
    }

    /// A text frame carrying `text` (UTF-8 JSON).
    static func text(_ text: ByteBuffer, allocator: ByteBufferAllocator) -> EncodedFrame {
        make(opcode: 0x1, allocator: allocator, capacity: text.readableBytes) { $0.writeImmutableBuffer(text) }
    }

    private static func make(opcode: UInt8, allocator: ByteBufferAllocator, capacity: Int, _ body: (inout ByteBuffer) -> Void) -> EncodedFrame {
        var buffer = allocator.buffer(capacity: capacity + maxHeader)
        buffer.moveWriterIndex(forwardBy: maxHeader)
        buffer.moveReaderIndex(forwardBy: maxHeader)
        body(&buffer)
        let length = buffer.readableBytes
        // RFC 6455 §5.2: FIN + opcode, then the shortest length form (7 bits, 16 or 64).
        let headerLength = length < 126 ? 2 : length <= Int(UInt16.max) ? 4 : 10
        let start = maxHeader - headerLength
        buffer.setInteger(0x80 | opcode, at: start)
        switch headerLength {
        case 2:
            buffer.setInteger(UInt8(length), at: start + 1)
        case 4:
            buffer.setInteger(UInt8(126), at: start + 1)
            buffer.setInteger(UInt16(length), at: start + 2)
        default:
            buffer.setInteger(UInt8(127), at: start + 1)
            buffer.setInteger(UInt64(length), at: start + 2)
        }
        buffer.moveReaderIndex(to: start)
        return EncodedFrame(buffer: buffer, headerLength: headerLength, opcode: opcode)
    }

    /// The body's size (the WebSocket payload).
    var payloadBytes: Int { buffer.readableBytes - headerLength }

    /// The same frame for the pipeline (a connection without its raw outlet).
    var webSocketFrame: WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode == 0x1 ? .text : .binary, data: buffer.getSlice(at: buffer.readerIndex + headerLength, length: payloadBytes)!)
    }
}
