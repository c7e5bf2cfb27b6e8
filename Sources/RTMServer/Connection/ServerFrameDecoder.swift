import NIOCore
import NIOWebSocket
import RTMWebSocket

/// What the server's frame decoder hands to `ConnectionHandler`.
enum ServerInbound {
    /// A control frame (ping, pong, close), unmasked (`maskKey` nil).
    case frame(WebSocketFrame)
    /// Whole data messages, text (JSON requests) and binary (PROTOCOL.md §2.3) alike, unmasked,
    /// in arrival order: every one that was complete in one read, handed over at once (a
    /// control frame between them splits the batch, so the order holds).
    case messages([Message])

    /// A whole data message.
    struct Message {
        var data: ByteBuffer
        /// A text message (else binary).
        var isText: Bool
    }
}

/// The server's WebSocket frame decoder (RFC 6455 §5), in place of NIO's `WebSocketFrameDecoder`
/// and `NIOWebSocketFrameAggregator`.
///
/// Why its own: a busy publisher sends hundreds of thousands of small binary frames a second,
/// and NIO's pair passes each one through the pipeline twice, boxed in `NIOAny`, and unmasks a
/// byte at a time; on the one event loop that reads a publisher that was a fifth of the time. This
/// decoder parses every complete frame of a read in one loop, unmasks eight bytes at a time in
/// place, reassembles fragmented messages, and hands all data messages of the read, text and
/// binary, to the handler as one batch (a browser's JSON publishes come as many as a binary
/// client's).
///
/// RFC 6455 to the letter, with the rules the SDK applies too (`RTMWebSocket`):
/// every violation throws a `WebSocketViolation` carrying its close code, which
/// `WebSocketViolationHandler` sends in a close frame before closing: 1002 for a protocol error
/// (an unmasked frame, §5.1; reserved bits, unknown opcodes, §5.2; bad fragment sequences or
/// more than `maxFragments` fragments, §5.4; long or fragmented control frames, §5.5; a
/// malformed close frame, §5.5.1), 1007 for a text message that is not UTF-8 (§8.1), 1009 for
/// a frame or message over `maxFrameSize`. Frames of a read before the violation are still
/// delivered; nothing after a close frame is.
struct ServerFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ServerInbound

    let maxFrameSize: Int
    /// Reassembly, UTF-8 and close-frame rules.
    private var assembler: WebSocketMessageAssembler

    init(maxFrameSize: Int, maxFragments: Int = 64) {
        self.maxFrameSize = maxFrameSize
        self.assembler = WebSocketMessageAssembler(maxMessageSize: maxFrameSize, maxFragments: maxFragments)
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
        // After the client's close frame its bytes are not read (RFC 6455 §5.5.1: it sends
        // nothing more), whatever they are.
        guard !assembler.isClosed else {
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            return .needMoreData
        }
        spans.removeAll(keepingCapacity: true)
        var failure: WebSocketViolation?
        var cursor = 0
        var anyMasked = false
        do {
            while let span = try Self.nextSpan(buffer, at: cursor, maxFrameSize: maxFrameSize) {
                spans.append(span)
                anyMasked = anyMasked || span.key != 0
                cursor = span.offset + span.length
                if span.header.opcode == .connectionClose { break }
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
        // is still alive), whatever the number of frames. Clients must mask (RFC 6455 §5.1,
        // checked in nextSpan); a zero key is a valid key that changes nothing, so it is skipped.
        if anyMasked {
            buffer.withUnsafeMutableReadableBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                for span in spans where span.key != 0 {
                    Self.unmask(base + span.offset, length: span.length, key: span.key)
                }
            }
        }
        // Pass 3: slice, reassemble and hand on, in the client's order.
        var batch: [ServerInbound.Message] = []
        let start = buffer.readerIndex
        for span in spans {
            let payload = buffer.getSlice(at: start + span.offset, length: span.length)!
            let assembled: WebSocketMessageAssembler.Message?
            do {
                assembled = try assembler.assemble(fin: span.header.fin, opcode: span.header.opcode, payload: payload)
            } catch {
                failure = error   // what came before it is still delivered, below
                break
            }
            if let message = assembled {
                switch message.opcode {
                case .binary, .text:
                    if batch.isEmpty { batch.reserveCapacity(spans.count) }
                    batch.append(ServerInbound.Message(data: message.data, isText: message.opcode == .text))
                default:
                    // Keep the client's order: the messages before this control frame go first.
                    if !batch.isEmpty { context.fireChannelRead(Self.wrapInboundOut(.messages(batch))); batch = [] }
                    context.fireChannelRead(Self.wrapInboundOut(.frame(WebSocketFrame(fin: true, opcode: message.opcode, data: message.data))))
                }
            }
        }
        buffer.moveReaderIndex(forwardBy: cursor)
        spans.removeAll(keepingCapacity: true)
        if !batch.isEmpty { context.fireChannelRead(Self.wrapInboundOut(.messages(batch))) }
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
    private static func nextSpan(_ buffer: ByteBuffer, at cursor: Int, maxFrameSize: Int) throws(WebSocketViolation) -> FrameSpan? {
        let start = buffer.readerIndex + cursor
        guard let b0: UInt8 = buffer.getInteger(at: start), let b1: UInt8 = buffer.getInteger(at: start + 1) else { return nil }
        let opcodeBits = b0 & 0x0F
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        var offset = 2
        var length = UInt64(b1 & 0x7F)
        if length == 126 {
            guard let value: UInt16 = buffer.getInteger(at: start + 2) else { return nil }
            length = UInt64(value)
            offset = 4
        } else if length == 127 {
            guard let value: UInt64 = buffer.getInteger(at: start + 2) else { return nil }
            length = value
            offset = 10
        }
        try WebSocketRules.checkHeader(fin: fin, reservedBits: b0 & 0x70, opcode: opcodeBits, masked: masked, length: length,
                                       fromClient: true, maxFrameSize: maxFrameSize)
        // Always masked here (checkHeader refused anything else).
        guard let key: UInt32 = buffer.getInteger(at: start + offset, endianness: .little) else { return nil }
        offset += 4
        let size = Int(length)
        guard buffer.readableBytes >= cursor + offset + size else { return nil }
        return FrameSpan(header: Header(fin: fin, opcode: WebSocketOpcode(encodedWebSocketOpcode: opcodeBits)!),
                         offset: cursor + offset, length: size, key: key)
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
