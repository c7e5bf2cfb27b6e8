import NIOCore

/// The compact binary form of the hot operations, carried in WebSocket **binary** messages (JSON
/// frames travel in text messages). Publishing and delivering channel messages is what a busy
/// server does most, so these skip JSON: little-endian integers and LEB128 varints,
/// length-prefixed strings (1-byte length). PROTOCOL.md §2.3 has the layouts.
///
/// A `message` frame is the same byte string for every subscriber (it names nothing about the
/// recipient), so the server encodes it once and writes the same bytes to all. It holds one or
/// more consecutive messages of one publisher (what one read of the publisher brought), sharing
/// one header, so a busy channel costs a few bytes per message beyond the payload.
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

        /// A publish (also what `FrameCodec.readPublish` makes of a JSON one).
        public init(requestID: UInt64, msgId: UInt64?, channelBytes: ByteBufferView, customType: String?, isText: Bool, payload: ByteBuffer) {
            self.requestID = requestID; self.msgId = msgId; self.channelBytes = channelBytes
            self.customType = customType; self.isText = isText; self.payload = payload
        }
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

        /// A message.
        public init(seq: UInt64, ts: Int64, epoch: String, channel: String, publisher: String, customType: String?, isText: Bool, payload: ByteBuffer) {
            self.seq = seq; self.ts = ts; self.epoch = epoch; self.channel = channel; self.publisher = publisher
            self.customType = customType; self.isText = isText; self.payload = payload
        }
    }

    /// One message's own part of a `message` frame (what is not shared by the frame's messages).
    public protocol MessageBody {
        /// Custom type, if any.
        var customType: String? { get }
        /// Text (true) or binary payload.
        var isText: Bool { get }
        /// The payload.
        var payload: ByteBuffer { get }
    }

    /// What a binary message holds.
    public enum Decoded {
        /// Channel messages (one or more, consecutive sequence numbers, one publisher).
        case messages([Message])
        /// Publish acknowledgements, in request order, each with its channel epoch.
        case publishAcks([PublishAck])
        /// Replies to binary `sendUser` requests, in request order.
        case sendUserReplies([SendUserReply])
        /// User messages (one or more, oldest first) from the store `epoch`.
        case userMessages(epoch: String, [UserMessage])
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
        writeRequestHeader(into: &buffer, op: publishOp, requestID: requestID, msgId: msgId, name: channel, customType: customType, isText: isText)
    }

    /// The common head of a publish or sendUser: op, flags, request id, [msgId], the channel or
    /// receiver, [customType].
    static func writeRequestHeader(into buffer: inout ByteBuffer, op: UInt8, requestID: UInt64, msgId: UInt64?, name: String,
                                   customType: String?, isText: Bool) {
        var flags: UInt8 = isText ? Flag.text : 0
        if msgId != nil { flags |= Flag.hasMsgId }
        if customType != nil { flags |= Flag.hasCustomType }
        buffer.writeInteger(op)
        buffer.writeInteger(flags)
        buffer.writeInteger(requestID, endianness: .little)
        if let msgId { buffer.writeInteger(msgId, endianness: .little) }
        writeShortString(name, into: &buffer)
        if let customType { writeShortString(customType, into: &buffer) }
    }

    /// Reads a publish frame (the whole binary message); a description of the problem if malformed.
    public static func readPublish(_ buffer: ByteBuffer) -> Result<Publish, FrameDecodingError> {
        readRequest(buffer, op: publishOp, kind: "publish")
    }

    /// Reads a publish or sendUser frame, which share their layout (op, flags, request id,
    /// [msgId], the channel or receiver, [customType], payload); `channelBytes` holds the name.
    /// A malformed one is an error naming `kind` and carrying the request id when readable.
    @inline(__always)
    static func readRequest(_ buffer: ByteBuffer, op expected: UInt8, kind: String) -> Result<Publish, FrameDecodingError> {
        // The fixed part is read from the bytes directly, in one access.
        let header = buffer.withUnsafeReadableBytes { bytes -> (flags: UInt8, id: UInt64, msgId: UInt64?, channelAt: Int, channelLength: Int)? in
            guard bytes.count >= 11, bytes[0] == expected else { return nil }
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
            // Every binary request starts with op, flags and the request id (u64 LE), so the id
            // can be read back into the error whenever those ten bytes arrived.
            let id: UInt64? = buffer.getInteger(at: buffer.readerIndex + 2, endianness: .little)
            if let op: UInt8 = buffer.getInteger(at: buffer.readerIndex), op != expected {
                return .failure(FrameDecodingError(reason: "unknown binary operation 0x\(String(op, radix: 16))", requestID: id))
            }
            return .failure(FrameDecodingError(reason: buffer.readableBytes == 0 ? "empty binary frame" : "binary \(kind) is truncated", requestID: id))
        }
        var b = buffer
        let channel = b.getSlice(at: b.readerIndex + header.channelAt, length: header.channelLength)!
        b.moveReaderIndex(forwardBy: header.channelAt + header.channelLength)
        var customType: String?
        if header.flags & Flag.hasCustomType != 0 {
            guard let length: UInt8 = b.readInteger(), let type = b.readString(length: Int(length)) else {
                return .failure(FrameDecodingError(reason: "binary \(kind) is truncated (customType)", requestID: header.id))
            }
            customType = type
        }
        return .success(Publish(requestID: header.id, msgId: header.msgId, channelBytes: channel.readableBytesView,
                                customType: customType, isText: header.flags & Flag.text != 0, payload: b))
    }

    // MARK: message (server → client)

    /// Appends the body of a `message` frame holding `messages` (consecutive sequence numbers
    /// from `seq`, all published by `publisher` at `ts`) to `buffer`.
    public static func writeMessages(into buffer: inout ByteBuffer, seq: UInt64, ts: Int64, epoch: String, channel: some Collection<UInt8>,
                                     publisher: String, messages: some Collection<some MessageBody>) {
        writeMessagesFrame(into: &buffer, seq: seq, ts: ts, template: MessageTemplate(epoch: epoch, channel: channel, publisher: publisher),
                           messages: messages, webSocketHeader: false)
    }

    /// The parts of a `message` frame that are the same for every message of one publisher in
    /// one channel (epoch, channel, publisher): encoded once, copied per frame.
    public struct MessageTemplate: Sendable {
        @usableFromInline let middle: [UInt8]

        /// Encodes the constant middle part.
        public init(epoch: String, channel: some Collection<UInt8>, publisher: String) {
            var buffer = ByteBuffer()
            writeShortString(epoch, into: &buffer)
            buffer.writeInteger(UInt8(truncatingIfNeeded: min(channel.count, 255)))
            buffer.writeBytes(channel.prefix(255))
            writeShortString(publisher, into: &buffer)
            middle = Array(buffer.readableBytesView)
        }

        /// The most bytes a frame's header takes before its items (op, flags, seq, ts, strings).
        public var maxHeaderBytes: Int { 2 + 10 + 10 + middle.count }
    }

    /// The body size of a `message` frame holding `messages`.
    @inlinable
    public static func messagesBodySize(seq: UInt64, ts: Int64, template: MessageTemplate, messages: some Collection<some MessageBody>) -> Int {
        var size = 2 + varintSize(seq) + varintSize(UInt64(bitPattern: ts)) + template.middle.count
        for message in messages { size += itemSize(message) }
        return size
    }

    /// The bytes one message adds to a `message` frame.
    @inlinable
    public static func itemSize(_ message: some MessageBody) -> Int {
        let length = message.payload.readableBytes
        var size = 1 + varintSize(UInt64(length)) + length
        if let customType = message.customType { size += 1 + min(customType.utf8.count, 255) }
        return size
    }

    /// Appends one complete server WebSocket frame (unmasked, final, binary) holding a `message`
    /// body with `messages`, with one capacity check and plain stores: this is what a busy
    /// channel runs for every read of its publisher. The bytes name no recipient.
    @inlinable
    public static func writeMessagesFrame(into buffer: inout ByteBuffer, seq: UInt64, ts: Int64, template: MessageTemplate,
                                          messages: some Collection<some MessageBody>, webSocketHeader: Bool = true) {
        let bodyLength = messagesBodySize(seq: seq, ts: ts, template: template, messages: messages)
        let headerLength = webSocketHeader ? webSocketHeaderLength(bodyLength) : 0
        let total = headerLength + bodyLength
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: total) { out in
            let base = out.baseAddress!
            if webSocketHeader { storeWebSocketHeader(at: base, length: bodyLength, opcode: 0x2) }   // FIN, binary
            var at = base + headerLength
            at.storeBytes(of: messageOp, as: UInt8.self)
            at.storeBytes(of: 0, toByteOffset: 1, as: UInt8.self)
            at += 2
            at = storeVarint(seq, at: at)
            at = storeVarint(UInt64(bitPattern: ts), at: at)
            template.middle.withUnsafeBytes { at.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            at += template.middle.count
            for message in messages {
                var flags: UInt8 = message.isText ? Flag.text : 0
                if message.customType != nil { flags |= Flag.hasCustomType }
                at.storeBytes(of: flags, as: UInt8.self)
                at += 1
                if let customType = message.customType {
                    let utf8 = Array(customType.utf8.prefix(255))
                    at.storeBytes(of: UInt8(utf8.count), as: UInt8.self)
                    utf8.withUnsafeBytes { if $0.count > 0 { (at + 1).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
                    at += 1 + utf8.count
                }
                at = message.payload.withUnsafeReadableBytes { bytes in
                    let next = storeVarint(UInt64(bytes.count), at: at)
                    if bytes.count > 0 { next.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                    return next + bytes.count
                }
            }
            precondition(at - base == total, "message frame size mismatch")
            return total
        }
    }

    /// Bytes of `value` as an unsigned LEB128 varint (7 bits per byte, low first).
    @inlinable @inline(__always)
    public static func varintSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }

    @inlinable @inline(__always)
    static func storeVarint(_ value: UInt64, at pointer: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        var value = value
        var at = pointer
        while value >= 0x80 {
            at.storeBytes(of: UInt8(truncatingIfNeeded: value) | 0x80, as: UInt8.self)
            value >>= 7
            at += 1
        }
        at.storeBytes(of: UInt8(value), as: UInt8.self)
        return at + 1
    }

    /// Reads an unsigned LEB128 varint; nil if truncated or longer than 10 bytes.
    public static func readVarint(_ buffer: inout ByteBuffer) -> UInt64? {
        var end = 0
        guard let value = buffer.withUnsafeReadableBytes({ readVarint($0, at: &end) }) else { return nil }
        buffer.moveReaderIndex(forwardBy: end)
        return value
    }

    /// Reads an unsigned LEB128 varint from `bytes` at `at`, moving `at` past it; nil (and `at`
    /// somewhere inside) if truncated or longer than 10 bytes. For readers that walk a frame's
    /// raw bytes.
    @inlinable
    public static func readVarint(_ bytes: UnsafeRawBufferPointer, at: inout Int) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while shift < 64, at < bytes.count {
            let byte = bytes[at]
            at += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    /// Decodes a server → client binary message.
    public static func decode(_ buffer: ByteBuffer) throws(FrameDecodingError) -> Decoded {
        var b = buffer
        guard let op: UInt8 = b.readInteger() else { throw FrameDecodingError(reason: "empty binary message") }
        switch op {
        case messageOp:
            guard let _: UInt8 = b.readInteger(), let seq = readVarint(&b), let ts = readVarint(&b),
                  let epoch = readShortString(&b), let channel = readShortString(&b), let publisher = readShortString(&b) else {
                throw FrameDecodingError(reason: "binary message is truncated")
            }
            var messages: [Message] = []
            while b.readableBytes > 0 {
                guard let flags: UInt8 = b.readInteger() else { throw FrameDecodingError(reason: "binary message is truncated") }
                var customType: String?
                if flags & Flag.hasCustomType != 0 {
                    guard let type = readShortString(&b) else { throw FrameDecodingError(reason: "binary message is truncated (customType)") }
                    customType = type
                }
                guard let length = readVarint(&b), length <= UInt64(b.readableBytes), let payload = b.readSlice(length: Int(length)) else {
                    throw FrameDecodingError(reason: "binary message is truncated (payload)")
                }
                messages.append(Message(seq: seq &+ UInt64(messages.count), ts: Int64(bitPattern: ts), epoch: epoch, channel: channel,
                                        publisher: publisher, customType: customType, isText: flags & Flag.text != 0, payload: payload))
            }
            guard !messages.isEmpty else { throw FrameDecodingError(reason: "binary message holds no message") }
            return .messages(messages)
        case publishAckOp:
            return .publishAcks(try decodePublishAcks(&b))
        case sendUserReplyOp:
            return .sendUserReplies(try decodeSendUserReplies(&b))
        case userMessageOp:
            let (epoch, messages) = try decodeUserMessages(&b)
            return .userMessages(epoch: epoch, messages)
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

    /// The size of an unmasked server frame header for a body of `length` bytes.
    @inlinable
    public static func webSocketHeaderLength(_ length: Int) -> Int {
        length < 126 ? 2 : length <= Int(UInt16.max) ? 4 : 10
    }

    /// Stores an unmasked, final frame header for a body of `length` bytes at `base`
    /// (`webSocketHeaderLength(length)` bytes), for frames written in place with plain stores.
    @inlinable
    public static func storeWebSocketHeader(at base: UnsafeMutableRawPointer, length: Int, opcode: UInt8) {
        base.storeBytes(of: 0x80 | opcode, as: UInt8.self)
        switch webSocketHeaderLength(length) {
        case 2:
            base.storeBytes(of: UInt8(length), toByteOffset: 1, as: UInt8.self)
        case 4:
            base.storeBytes(of: 126, toByteOffset: 1, as: UInt8.self)
            base.storeBytes(of: UInt16(length).bigEndian, toByteOffset: 2, as: UInt16.self)
        default:
            base.storeBytes(of: 127, toByteOffset: 1, as: UInt8.self)
            base.storeBytes(of: UInt64(length).bigEndian, toByteOffset: 2, as: UInt64.self)
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
