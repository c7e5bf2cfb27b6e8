import NIOCore
import NIOWebSocket

/// What the server's frame decoder hands to `ConnectionHandler`.
enum ServerInbound {
    /// A whole text message or a control frame, unmasked (`maskKey` nil).
    case frame(WebSocketFrame)
    /// Whole binary messages (publishes, PROTOCOL.md §2.3), unmasked, in arrival order: every one
    /// that was complete in one read, handed over at once.
    case binary([ByteBuffer])
}

/// A protocol violation by the client that NIO's error handler does not name.
struct WebSocketViolation: Error, CustomStringConvertible {
    let description: String
}

/// The server's WebSocket frame decoder (RFC 6455 §5), in place of NIO's `WebSocketFrameDecoder`
/// and `NIOWebSocketFrameAggregator`.
///
/// Why its own: a busy publisher sends hundreds of thousands of small binary frames a second,
/// and NIO's pair passes each one through the pipeline twice, boxed in `NIOAny`, and unmasks a
/// byte at a time; on the one event loop that reads a publisher that was a fifth of the time. This
/// decoder parses every complete frame of a read in one loop, unmasks eight bytes at a time in
/// place, reassembles fragmented messages, and hands all binary messages of the read to the
/// handler as one batch. Frame rules are NIO's: the size limit and the control-frame rules throw
/// `NIOWebSocketError` (so `WebSocketProtocolErrorHandler` answers with the right close code);
/// the other violations (reserved bits, unknown opcodes, bad fragment sequences) throw
/// `WebSocketViolation` and the connection is closed.
struct ServerFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ServerInbound

    let maxFrameSize: Int
    let maxFragments: Int
    /// A fragmented message being reassembled: its opcode, bytes so far, fragment count.
    private var partial: (opcode: WebSocketOpcode, data: ByteBuffer, count: Int)?

    init(maxFrameSize: Int, maxFragments: Int = 64) {
        self.maxFrameSize = maxFrameSize
        self.maxFragments = maxFragments
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        var batch: [ByteBuffer] = []
        while let (header, payload) = try nextFrame(&buffer) {
            if let message = try assemble(header, payload) {
                if message.opcode == .binary {
                    batch.append(message.data)
                } else {
                    // Keep the client's order: the binary messages before this one go first.
                    if !batch.isEmpty { context.fireChannelRead(Self.wrapInboundOut(.binary(batch))); batch = [] }
                    context.fireChannelRead(Self.wrapInboundOut(.frame(WebSocketFrame(fin: true, opcode: message.opcode, data: message.data))))
                }
            }
        }
        if !batch.isEmpty { context.fireChannelRead(Self.wrapInboundOut(.binary(batch))) }
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }

    private struct Header {
        let fin: Bool
        let opcode: WebSocketOpcode
    }

    /// The next complete frame, unmasked, consumed from `buffer`; nil if it has not all arrived.
    private func nextFrame(_ buffer: inout ByteBuffer) throws -> (Header, ByteBuffer)? {
        let start = buffer.readerIndex
        guard let b0: UInt8 = buffer.getInteger(at: start), let b1: UInt8 = buffer.getInteger(at: start + 1) else { return nil }
        guard b0 & 0x70 == 0 else { throw WebSocketViolation(description: "reserved bits set in a frame (no extension was negotiated)") }
        let opcodeBits = b0 & 0x0F
        guard let opcode = WebSocketOpcode(encodedWebSocketOpcode: opcodeBits),
              [0x0, 0x1, 0x2, 0x8, 0x9, 0xA].contains(opcodeBits) else {
            throw WebSocketViolation(description: "unknown WebSocket opcode \(opcodeBits)")
        }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        var offset = 2
        var length = Int(b1 & 0x7F)
        if length == 126 {
            guard let value: UInt16 = buffer.getInteger(at: start + 2) else { return nil }
            length = Int(value)
            offset = 4
        } else if length == 127 {
            guard let value: UInt64 = buffer.getInteger(at: start + 2) else { return nil }
            guard value <= UInt64(maxFrameSize) else { throw NIOWebSocketError.invalidFrameLength }
            length = Int(value)
            offset = 10
        }
        if opcodeBits & 0x8 != 0 {   // control frame (RFC 6455 §5.5)
            guard fin else { throw NIOWebSocketError.fragmentedControlFrame }
            guard length <= 125 else { throw NIOWebSocketError.multiByteControlFrameLength }
        }
        guard length <= maxFrameSize else { throw NIOWebSocketError.invalidFrameLength }
        var key: UInt32 = 0
        if masked {
            guard let value: UInt32 = buffer.getInteger(at: start + offset, endianness: .little) else { return nil }
            key = value
            offset += 4
        }
        guard buffer.readableBytes >= offset + length else { return nil }
        buffer.moveReaderIndex(forwardBy: offset)
        if key != 0 {
            Self.unmask(&buffer, length: length, key: key)
        }
        let payload = buffer.readSlice(length: length)!
        return (Header(fin: fin, opcode: opcode), payload)
    }

    /// Reassembles fragmented messages; returns a whole message or control frame, or nil while a
    /// fragmented one is incomplete.
    private mutating func assemble(_ header: Header, _ payload: ByteBuffer) throws -> (opcode: WebSocketOpcode, data: ByteBuffer)? {
        switch header.opcode {
        case .text, .binary:
            guard partial == nil else { throw WebSocketViolation(description: "a new message started before the fragmented one ended") }
            if header.fin { return (header.opcode, payload) }
            partial = (header.opcode, payload, 1)
            return nil
        case .continuation:
            guard var current = partial else { throw WebSocketViolation(description: "a continuation frame without a message to continue") }
            current.count += 1
            guard current.count <= maxFragments else { throw WebSocketViolation(description: "a message in more than \(maxFragments) fragments") }
            guard current.data.readableBytes + payload.readableBytes <= maxFrameSize else { throw NIOWebSocketError.invalidFrameLength }
            var more = payload
            current.data.writeBuffer(&more)
            if header.fin {
                partial = nil
                return (current.opcode, current.data)
            }
            partial = current
            return nil
        default:
            return (header.opcode, payload)   // control frames may come between fragments
        }
    }

    /// XORs the next `length` readable bytes with the masking key, in place, eight at a time.
    static func unmask(_ buffer: inout ByteBuffer, length: Int, key: UInt32) {
        buffer.withUnsafeMutableReadableBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            // `key` holds the four key bytes in wire order (read little-endian), so byte i of
            // the payload is XORed with byte (i % 4) of it.
            let wide = UInt64(key) | (UInt64(key) << 32)
            var i = 0
            while i + 8 <= length {
                let word = UInt64(littleEndian: (base + i).loadUnaligned(as: UInt64.self))
                (base + i).storeBytes(of: (word ^ wide).littleEndian, as: UInt64.self)
                i += 8
            }
            while i < length {
                let keyByte = UInt8(truncatingIfNeeded: key >> (8 * UInt32(i & 3)))
                base.storeBytes(of: base.load(fromByteOffset: i, as: UInt8.self) ^ keyByte, toByteOffset: i, as: UInt8.self)
                i += 1
            }
        }
    }
}
