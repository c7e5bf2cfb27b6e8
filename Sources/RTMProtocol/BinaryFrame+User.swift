import NIOCore

/// The binary form of user (peer-to-peer) messages (SPEC M-1; PROTOCOL.md §2.3): `sendUser`,
/// its replies, the deliveries and `ackUser`, each the same request or event as its JSON twin.
extension BinaryFrame {
    /// Client → server: send a user message (the JSON `sendUser`).
    public static let sendUserOp: UInt8 = 0x03
    /// Client → server: acknowledge user messages up to a store id (the JSON `ackUser`).
    public static let ackUserOp: UInt8 = 0x04
    /// Server → client: replies to binary `sendUser` requests.
    public static let sendUserReplyOp: UInt8 = 0x83
    /// Server → client: user messages for the connection's user.
    public static let userMessageOp: UInt8 = 0x84

    /// Flag of a `sendUser` reply: the receiver had a connection when the message was stored.
    public static let receiverOnlineFlag: UInt8 = 0x01
    /// Flag of a `sendUser` reply: whether the receiver is online is not told (the sender has no
    /// `status` grant on it); `receiverOnlineFlag` is then clear.
    public static let receiverStatusUntoldFlag: UInt8 = 0x02

    /// A decoded binary `sendUser`. The receiver's id is a view into the frame.
    public struct SendUser {
        /// Correlation id, echoed in the reply.
        public var requestID: UInt64
        /// Client message id (M-3), if sent.
        public var msgId: UInt64?
        /// The receiver's user id, as bytes.
        public var receiverBytes: ByteBufferView
        /// Custom type, if any.
        public var customType: String?
        /// Text (true) or binary payload.
        public var isText: Bool
        /// The payload.
        public var payload: ByteBuffer

        /// The receiver's user id.
        public var receiver: String { String(decoding: receiverBytes, as: UTF8.self) }
    }

    /// The reply to one binary `sendUser`: the message is durably stored.
    public struct SendUserReply: Sendable, Equatable {
        /// The request's id.
        public var requestID: UInt64
        /// The store's id of the message (the JSON reply's `msgId`).
        public var msgId: UInt64
        /// Whether the receiver was online (false: the JSON reply's code -11035); nil: not told
        /// (the sender has no `status` grant on the receiver).
        public var receiverOnline: Bool?

        /// A reply.
        public init(requestID: UInt64, msgId: UInt64, receiverOnline: Bool?) {
            self.requestID = requestID; self.msgId = msgId; self.receiverOnline = receiverOnline
        }
    }

    /// One delivered user message.
    public struct UserMessage: Sendable, Equatable, MessageBody {
        /// The store's id (increasing per store; acknowledge up to it).
        public var msgId: UInt64
        /// Server time when it was accepted, ms since the Unix epoch.
        public var ts: Int64
        /// The sender's user id.
        public var publisher: String
        /// Custom type, if any.
        public var customType: String?
        /// Text (true) or binary payload.
        public var isText: Bool
        /// The payload.
        public var payload: ByteBuffer

        /// A message.
        public init(msgId: UInt64, ts: Int64, publisher: String, customType: String?, isText: Bool, payload: ByteBuffer) {
            self.msgId = msgId; self.ts = ts; self.publisher = publisher
            self.customType = customType; self.isText = isText; self.payload = payload
        }
    }

    // MARK: sendUser (client → server)

    /// Appends a `sendUser` frame's body.
    public static func writeSendUser(into buffer: inout ByteBuffer, requestID: UInt64, msgId: UInt64?, receiver: String,
                                     customType: String?, isText: Bool, payload: some Collection<UInt8>) {
        writeSendUserHeader(into: &buffer, requestID: requestID, msgId: msgId, receiver: receiver, customType: customType, isText: isText)
        buffer.writeBytes(payload)
    }

    /// Appends everything of a `sendUser` frame but the payload, which follows to the end.
    public static func writeSendUserHeader(into buffer: inout ByteBuffer, requestID: UInt64, msgId: UInt64?, receiver: String,
                                           customType: String?, isText: Bool) {
        writeRequestHeader(into: &buffer, op: sendUserOp, requestID: requestID, msgId: msgId, name: receiver, customType: customType, isText: isText)
    }

    /// Reads a `sendUser` frame (the whole binary message). A malformed one is an error that
    /// carries the request id when the frame was long enough to hold it.
    public static func readSendUser(_ buffer: ByteBuffer) -> Result<SendUser, FrameDecodingError> {
        // The same layout as a publish, the receiver in place of the channel.
        readRequest(buffer, op: sendUserOp, kind: "sendUser").map { request in
            SendUser(requestID: request.requestID, msgId: request.msgId, receiverBytes: request.channelBytes,
                     customType: request.customType, isText: request.isText, payload: request.payload)
        }
    }

    // MARK: ackUser (client → server)

    /// Appends an `ackUser` frame's body: every user message up to `msgId` is acknowledged.
    public static func writeAckUser(into buffer: inout ByteBuffer, upTo msgId: UInt64) {
        buffer.writeInteger(ackUserOp)
        writeVarint(msgId, into: &buffer)
    }

    /// Reads an `ackUser` frame: the store id acknowledged.
    public static func readAckUser(_ buffer: ByteBuffer) -> Result<UInt64, FrameDecodingError> {
        var b = buffer
        guard let op: UInt8 = b.readInteger(), op == ackUserOp else { return .failure(FrameDecodingError(reason: "not a binary ackUser")) }
        guard let id = readVarint(&b), b.readableBytes == 0 else { return .failure(FrameDecodingError(reason: "binary ackUser is malformed")) }
        return .success(id)
    }

    // MARK: replies and deliveries (server → client)

    /// Appends a `sendUser` replies frame's body.
    public static func writeSendUserReplies(into buffer: inout ByteBuffer, _ replies: some Collection<SendUserReply>) {
        buffer.writeInteger(sendUserReplyOp)
        buffer.writeInteger(UInt16(truncatingIfNeeded: replies.count), endianness: .little)
        for reply in replies {
            buffer.writeInteger(reply.requestID, endianness: .little)
            buffer.writeInteger(reply.msgId, endianness: .little)
            buffer.writeInteger(reply.receiverOnline.map { $0 ? receiverOnlineFlag : 0 } ?? receiverStatusUntoldFlag)
        }
    }

    /// Appends a user-messages frame's body: `messages` (oldest first) from the store `epoch`.
    public static func writeUserMessages(into buffer: inout ByteBuffer, epoch: String, _ messages: some Collection<UserMessage>) {
        buffer.writeInteger(userMessageOp)
        buffer.writeInteger(UInt8(0))
        writeShortString(epoch, into: &buffer)
        for message in messages {
            writeVarint(message.msgId, into: &buffer)
            writeVarint(UInt64(bitPattern: message.ts), into: &buffer)
            writeShortString(message.publisher, into: &buffer)
            var flags: UInt8 = message.isText ? Flag.text : 0
            if message.customType != nil { flags |= Flag.hasCustomType }
            buffer.writeInteger(flags)
            if let customType = message.customType { writeShortString(customType, into: &buffer) }
            writeVarint(UInt64(message.payload.readableBytes), into: &buffer)
            buffer.writeImmutableBuffer(message.payload)
        }
    }

    /// Appends an unsigned LEB128 varint.
    public static func writeVarint(_ value: UInt64, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 10) { out in
            storeVarint(value, at: out.baseAddress!) - out.baseAddress!
        }
    }

    static func decodeSendUserReplies(_ b: inout ByteBuffer) throws(FrameDecodingError) -> [SendUserReply] {
        guard let count: UInt16 = b.readInteger(endianness: .little) else { throw FrameDecodingError(reason: "binary sendUser reply is truncated") }
        var replies: [SendUserReply] = []
        replies.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let id: UInt64 = b.readInteger(endianness: .little), let msgId: UInt64 = b.readInteger(endianness: .little),
                  let flags: UInt8 = b.readInteger() else {
                throw FrameDecodingError(reason: "binary sendUser reply is truncated")
            }
            replies.append(SendUserReply(requestID: id, msgId: msgId,
                                         receiverOnline: flags & receiverStatusUntoldFlag != 0 ? nil : flags & receiverOnlineFlag != 0))
        }
        return replies
    }

    static func decodeUserMessages(_ b: inout ByteBuffer) throws(FrameDecodingError) -> (epoch: String, messages: [UserMessage]) {
        guard let _: UInt8 = b.readInteger(), let epoch = readShortString(&b) else {
            throw FrameDecodingError(reason: "binary user message is truncated")
        }
        var messages: [UserMessage] = []
        while b.readableBytes > 0 {
            guard let msgId = readVarint(&b), let ts = readVarint(&b), let publisher = readShortString(&b),
                  let flags: UInt8 = b.readInteger() else {
                throw FrameDecodingError(reason: "binary user message is truncated")
            }
            var customType: String?
            if flags & Flag.hasCustomType != 0 {
                guard let type = readShortString(&b) else { throw FrameDecodingError(reason: "binary user message is truncated (customType)") }
                customType = type
            }
            guard let length = readVarint(&b), length <= UInt64(b.readableBytes), let payload = b.readSlice(length: Int(length)) else {
                throw FrameDecodingError(reason: "binary user message is truncated (payload)")
            }
            messages.append(UserMessage(msgId: msgId, ts: Int64(bitPattern: ts), publisher: publisher, customType: customType,
                                        isText: flags & Flag.text != 0, payload: payload))
        }
        guard !messages.isEmpty else { throw FrameDecodingError(reason: "binary user message frame holds no message") }
        return (epoch, messages)
    }
}
