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

    /// Where one complete frame of the current read lies in the cumulation buffer.
    private struct FrameSpan {
        let header: Header
        /// Offset of the payload from the buffer's reader index, and its length.
        let offset: Int
        let length: Int
        let key: UInt32
    }

    /// The spans of the current read (kept between reads so its storage is reused).
    private var spans: [FrameSpan] = []

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        // Pass 1: find every complete frame of the read (headers only, no slice taken). A
        // violation stops the scan; the frames before it are still delivered, then it is thrown.
        spans.removeAll(keepingCapacity: true)
        var failure: (any Error)?
        var cursor = 0
        var anyMasked = false
        do {
            while let span = try Self.nextSpan(buffer, at: cursor, maxFrameSize: maxFrameSize) {
                spans.append(span)
                anyMasked = anyMasked || span.key != 0
                cursor = span.offset + span.length
            }
        } catch {
            failure = error
        }
        // Pass 2: unmask every payload in place, in one mutable access to the buffer, before any
        // slice of it exists. Why here and not per frame: a slice handed on shares the
        // cumulation buffer's storage, so writing into the buffer after it was taken makes NIO
        // copy the whole buffer (copy-on-write) for every later masked frame, which is quadratic
        // in the frames per read (1,000 pipelined publishes copied the read 1,000 times). Why
        // not unmask into a fresh buffer per frame: one allocation and copy per frame, where in
        // place costs none. So the read is copied at most once (only if an earlier slice of it
        // is still alive), whatever the number of frames. Clients must mask (RFC 6455 §5.3);
        // a zero key is a valid key that changes nothing, so it is skipped.
        if anyMasked {
            buffer.withUnsafeMutableReadableBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                for span in spans where span.key != 0 {
                    Self.unmask(base + span.offset, length: span.length, key: span.key)
                }
            }
        }
        // Pass 3: slice, reassemble and hand on, in the client's order.
        var batch: [ByteBuffer] = []
        let start = buffer.readerIndex
        for span in spans {
            let payload = buffer.getSlice(at: start + span.offset, length: span.length)!
            if let message = try assemble(span.header, payload) {
                if message.opcode == .binary {
                    batch.append(message.data)
                } else {
                    // Keep the client's order: the binary messages before this one go first.
                    if !batch.isEmpty { context.fireChannelRead(Self.wrapInboundOut(.binary(batch))); batch = [] }
                    context.fireChannelRead(Self.wrapInboundOut(.frame(WebSocketFrame(fin: true, opcode: message.opcode, data: message.data))))
                }
            }
        }
        buffer.moveReaderIndex(forwardBy: cursor)
        spans.removeAll(keepingCapacity: true)
        if !batch.isEmpty { context.fireChannelRead(Self.wrapInboundOut(.binary(batch))) }
        if let failure { throw failure }
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }

    private struct Header {
        let fin: Bool
        let opcode: WebSocketOpcode
    }

    /// The complete frame starting `cursor` bytes past the reader index, or nil if it has not
    /// all arrived. Reads only; the payload is still masked.
    private static func nextSpan(_ buffer: ByteBuffer, at cursor: Int, maxFrameSize: Int) throws -> FrameSpan? {
        let start = buffer.readerIndex + cursor
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
        guard buffer.readableBytes >= cursor + offset + length else { return nil }
        return FrameSpan(header: Header(fin: fin, opcode: opcode), offset: cursor + offset, length: length, key: key)
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

    /// XORs `length` bytes at `base` with the masking key, eight at a time.
    static func unmask(_ base: UnsafeMutableRawPointer, length: Int, key: UInt32) {
        // `key` holds the four key bytes in wire order (read little-endian), so byte i of the
        // payload is XORed with byte (i % 4) of it.
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
