import NIOCore

/// The compact binary form of the hot operations, carried in WebSocket **binary** messages (JSON
/// frames travel in text messages). Publishing and delivering channel messages is what a busy
/// server does most, so these skip JSON: little-endian integers, length-prefixed strings
/// (1-byte length), the payload last. PROTOCOL.md §2.3 has the layouts.
///
/// A `message` is the same byte string for every subscriber (it names nothing about the
/// recipient), so the server encodes it once and writes the same bytes to all.
public enum BinaryFrame {
    /// Client → server: publish to a channel.
    public static let publishOp: UInt8 = 0x01
    /// Server → client: a channel message.
    public static let messageOp: UInt8 = 0x81
    /// Server → client: acknowledgements of binary publishes.
    public static let publishAckOp: UInt8 = 0x82

    /// Flag bits.
    public enum Flag {
        /// A client message id follows (publish).
        public static let hasMsgId: UInt8 = 0x01
        /// A custom type follows.
        public static let hasCustomType: UInt8 = 0x02
        /// The payload is UTF-8 text (else binary data).
        public static let text: UInt8 = 0x04
    }

    /// A decoded binary publish. Strings are views into the frame (`channelBytes`), so reading
    /// one costs no allocation; `channel` makes a String when needed.
    public struct Publish {
        /// Correlation id, echoed in the acknowledgement.
        public var requestID: UInt64
        /// Client message id (M-3), if sent.
        public var msgId: UInt64?
        /// The channel name's bytes.
        public var channelBytes: ByteBufferView
        /// Custom type, if any.
        public var customType: String?
        /// Text (true) or binary payload.
        public var isText: Bool
        /// The payload.
        public var payload: ByteBuffer

        /// The channel name.
        public var channel: String { String(decoding: channelBytes, as: UTF8.self) }
    }

    /// A decoded channel message.
    public struct Message: Sendable, Equatable {
        /// Sequence number in the channel.
        public var seq: UInt64
        /// Server time, ms since the Unix epoch.
        public var ts: Int64
        /// The channel's epoch.
        public var epoch: String
        /// The channel.
        public var channel: String
        /// The publisher's user id.
        public var publisher: String
        /// Custom type, if any.
        public var customType: String?
        /// Text (true) or binary payload.
        public var isText: Bool
        /// The payload.
        public var payload: ByteBuffer
    }

    /// What a binary message holds.
    public enum Decoded {
        /// A channel message.
        case message(Message)
        /// Publish acknowledgements: (request id, sequence number) pairs.
        case publishAcks([(requestID: UInt64, seq: UInt64)])
    }

    // MARK: publish (client → server)

    /// Appends a publish frame's body to `buffer`.
    public static func writePublish(into buffer: inout ByteBuffer, requestID: UInt64, msgId: UInt64?, channel: String,
                                    customType: String?, isText: Bool, payload: some Collection<UInt8>) {
        writePublishHeader(into: &buffer, requestID: requestID, msgId: msgId, channel: channel, customType: customType, isText: isText)
        buffer.writeBytes(payload)
    }

    /// Appends everything of a publish frame but the payload, which follows to the end.
    public static func writePublishHeader(into buffer: inout ByteBuffer, requestID: UInt64, msgId: UInt64?, channel: String,
                                          customType: String?, isText: Bool) {
        var flags: UInt8 = isText ? Flag.text : 0
        if msgId != nil { flags |= Flag.hasMsgId }
        if customType != nil { flags |= Flag.hasCustomType }
        buffer.writeInteger(publishOp)
        buffer.writeInteger(flags)
        buffer.writeInteger(requestID, endianness: .little)
        if let msgId { buffer.writeInteger(msgId, endianness: .little) }
        writeShortString(channel, into: &buffer)
        if let customType { writeShortString(customType, into: &buffer) }
    }

    /// Where the payload starts in a `message` body (for readers that only want the payload).
    public static func messagePayloadOffset(_ body: ByteBuffer) -> Int? {
        let base = body.readerIndex
        guard let flags: UInt8 = body.getInteger(at: base + 1) else { return nil }
        var offset = 18
        for _ in 0..<(flags & Flag.hasCustomType != 0 ? 4 : 3) {
            guard let length: UInt8 = body.getInteger(at: base + offset) else { return nil }
            offset += 1 + Int(length)
        }
        return offset <= body.readableBytes ? offset : nil
    }

    /// Reads a publish frame (the whole binary message); a description of the problem if malformed.
    public static func readPublish(_ buffer: ByteBuffer) -> Result<Publish, FrameDecodingError> {
        // The fixed part is read from the bytes directly, in one access.
        let header = buffer.withUnsafeReadableBytes { bytes -> (flags: UInt8, id: UInt64, msgId: UInt64?, channelAt: Int, channelLength: Int)? in
            guard bytes.count >= 11, bytes[0] == publishOp else { return nil }
            let flags = bytes[1]
            let id = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt64.self))
            var offset = 10
            var msgId: UInt64?
            if flags & Flag.hasMsgId != 0 {
                guard bytes.count >= 19 else { return nil }
                msgId = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 10, as: UInt64.self))
                offset = 18
            }
            let length = Int(bytes[offset])
            guard bytes.count >= offset + 1 + length else { return nil }
            return (flags, id, msgId, offset + 1, length)
        }
        guard let header else {
            if buffer.readableBytes > 0, buffer.getInteger(at: buffer.readerIndex) != publishOp {
                return .failure(FrameDecodingError(reason: "unknown binary operation"))
            }
            return .failure(FrameDecodingError(reason: "binary publish is truncated"))
        }
        var b = buffer
        let channel = b.getSlice(at: b.readerIndex + header.channelAt, length: header.channelLength)!
        b.moveReaderIndex(forwardBy: header.channelAt + header.channelLength)
        var customType: String?
        if header.flags & Flag.hasCustomType != 0 {
            guard let length: UInt8 = b.readInteger(), let type = b.readString(length: Int(length)) else {
                return .failure(FrameDecodingError(reason: "binary publish is truncated (customType)"))
            }
            customType = type
        }
        return .success(Publish(requestID: header.id, msgId: header.msgId, channelBytes: channel.readableBytesView,
                                customType: customType, isText: header.flags & Flag.text != 0, payload: b))
    }

    // MARK: message (server → client)

    /// Appends a channel message's body to `buffer`.
    public static func writeMessage(into buffer: inout ByteBuffer, seq: UInt64, ts: Int64, epoch: String, channel: some Collection<UInt8>,
                                    publisher: String, customType: String?, isText: Bool, payload: ByteBuffer) {
        var flags: UInt8 = isText ? Flag.text : 0
        if customType != nil { flags |= Flag.hasCustomType }
        buffer.writeInteger(messageOp)
        buffer.writeInteger(flags)
        buffer.writeInteger(seq, endianness: .little)
        buffer.writeInteger(ts, endianness: .little)
        writeShortString(epoch, into: &buffer)
        buffer.writeInteger(UInt8(truncatingIfNeeded: channel.count))
        buffer.writeBytes(channel)
        writeShortString(publisher, into: &buffer)
        if let customType { writeShortString(customType, into: &buffer) }
        buffer.writeImmutableBuffer(payload)
    }

    /// The parts of a `message` that are the same for every message of one publisher in one
    /// channel (epoch, channel, publisher): encoded once, copied per message.
    public struct MessageTemplate: Sendable {
        let middle: [UInt8]

        /// Encodes the constant middle part.
        public init(epoch: String, channel: some Collection<UInt8>, publisher: String) {
            var buffer = ByteBuffer()
            writeShortString(epoch, into: &buffer)
            buffer.writeInteger(UInt8(truncatingIfNeeded: channel.count))
            buffer.writeBytes(channel)
            writeShortString(publisher, into: &buffer)
            middle = Array(buffer.readableBytesView)
        }
    }

    /// Appends one complete server WebSocket frame holding a `message` (the same bytes as a
    /// WebSocket header followed by `writeMessage`), with one capacity check and plain stores:
    /// this is the loop a busy channel runs for every message.
    public static func writeMessageFrame(into buffer: inout ByteBuffer, seq: UInt64, ts: Int64, template: MessageTemplate,
                                         customType: String?, isText: Bool, payload: ByteBuffer) {
        if let customType {   // rare: the general path
            var body = ByteBuffer()
            body.writeInteger(messageOp)
            body.writeInteger((isText ? Flag.text : 0) | Flag.hasCustomType)
            body.writeInteger(seq, endianness: .little)
            body.writeInteger(ts, endianness: .little)
            body.writeBytes(template.middle)
            writeShortString(customType, into: &body)
            body.writeImmutableBuffer(payload)
            writeWebSocketHeader(into: &buffer, length: body.readableBytes)
            buffer.writeImmutableBuffer(body)
            return
        }
        let bodyLength = 18 + template.middle.count + payload.readableBytes
        let headerLength = bodyLength < 126 ? 2 : (bodyLength <= Int(UInt16.max) ? 4 : 10)
        let total = headerLength + bodyLength
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: total) { out in
            let base = out.baseAddress!
            base.storeBytes(of: 0x82, as: UInt8.self)
            switch headerLength {
            case 2:
                base.storeBytes(of: UInt8(bodyLength), toByteOffset: 1, as: UInt8.self)
            case 4:
                base.storeBytes(of: 126, toByteOffset: 1, as: UInt8.self)
                base.storeBytes(of: UInt16(bodyLength).bigEndian, toByteOffset: 2, as: UInt16.self)
            default:
                base.storeBytes(of: 127, toByteOffset: 1, as: UInt8.self)
                base.storeBytes(of: UInt64(bodyLength).bigEndian, toByteOffset: 2, as: UInt64.self)
            }
            let body = base + headerLength
            body.storeBytes(of: messageOp, as: UInt8.self)
            body.storeBytes(of: isText ? Flag.text : 0, toByteOffset: 1, as: UInt8.self)
            body.storeBytes(of: seq.littleEndian, toByteOffset: 2, as: UInt64.self)
            body.storeBytes(of: ts.littleEndian, toByteOffset: 10, as: Int64.self)
            template.middle.withUnsafeBytes { (body + 18).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            payload.withUnsafeReadableBytes { bytes in
                if bytes.count > 0 { (body + 18 + template.middle.count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
            }
            return total
        }
    }

    /// Appends publish acknowledgements to `buffer`.
    public static func writePublishAcks(into buffer: inout ByteBuffer, _ acks: [(requestID: UInt64, seq: UInt64)]) {
        buffer.writeInteger(publishAckOp)
        buffer.writeInteger(UInt16(truncatingIfNeeded: acks.count), endianness: .little)
        for ack in acks {
            buffer.writeInteger(ack.requestID, endianness: .little)
            buffer.writeInteger(ack.seq, endianness: .little)
        }
    }

    /// Decodes a server → client binary message.
    public static func decode(_ buffer: ByteBuffer) throws(FrameDecodingError) -> Decoded {
        var b = buffer
        guard let op: UInt8 = b.readInteger() else { throw FrameDecodingError(reason: "empty binary message") }
        switch op {
        case messageOp:
            guard let flags: UInt8 = b.readInteger(), let seq: UInt64 = b.readInteger(endianness: .little),
                  let ts: Int64 = b.readInteger(endianness: .little), let epoch = readShortString(&b),
                  let channel = readShortString(&b), let publisher = readShortString(&b) else {
                throw FrameDecodingError(reason: "binary message is truncated")
            }
            var customType: String?
            if flags & Flag.hasCustomType != 0 {
                guard let type = readShortString(&b) else { throw FrameDecodingError(reason: "binary message is truncated") }
                customType = type
            }
            return .message(Message(seq: seq, ts: ts, epoch: epoch, channel: channel, publisher: publisher,
                                    customType: customType, isText: flags & Flag.text != 0, payload: b))
        case publishAckOp:
            guard let count: UInt16 = b.readInteger(endianness: .little) else { throw FrameDecodingError(reason: "binary ack is truncated") }
            var acks: [(requestID: UInt64, seq: UInt64)] = []
            acks.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let id: UInt64 = b.readInteger(endianness: .little), let seq: UInt64 = b.readInteger(endianness: .little) else {
                    throw FrameDecodingError(reason: "binary ack is truncated")
                }
                acks.append((id, seq))
            }
            return .publishAcks(acks)
        default:
            throw FrameDecodingError(reason: "unknown binary operation 0x\(String(op, radix: 16))")
        }
    }

    // MARK: WebSocket framing written by hand (server side: unmasked)

    /// Appends an unmasked, final WebSocket binary frame header for a body of `length` bytes.
    public static func writeWebSocketHeader(into buffer: inout ByteBuffer, length: Int, opcode: UInt8 = 0x2) {
        buffer.writeInteger(0x80 | opcode)
        if length < 126 {
            buffer.writeInteger(UInt8(length))
        } else if length <= Int(UInt16.max) {
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        } else {
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
    }

    static func writeShortString(_ string: String, into buffer: inout ByteBuffer) {
        let utf8 = string.utf8
        let count = min(utf8.count, 255)
        buffer.writeInteger(UInt8(count))
        buffer.writeBytes(utf8.prefix(count))
    }

    static func readShortString(_ buffer: inout ByteBuffer) -> String? {
        guard let length: UInt8 = buffer.readInteger() else { return nil }
        return buffer.readString(length: Int(length))
    }
}
