import Foundation
import NIOCore
import RTMProtocol

/// What one event of the mailbox writes through the event loops: the binary `sendUser` replies
/// and the deliveries, gathered per loop and per connection by the thread that ran the event
/// (the mailbox's `settler`, not the store's) in one pass; each loop with work gets only its
/// part and encodes and writes it (one frame per connection where they fit, one flush per
/// connection): a commit for a thousand receivers costs one hop per loop, and no loop looks at
/// another loop's messages.
struct UserMessageWrites: Sendable {
    /// What goes to one connection, in the order it came.
    struct Part: Sendable {
        let connection: ConnectionRef
        var replies: [BinaryFrame.SendUserReply] = []
        /// Deliveries take the binary form (`0x84`), else JSON.
        var binary = true
        var messages: [StoredUserMessage] = []
    }

    /// One loop's parts, per connection in first-seen order.
    struct Loop: Sendable {
        let loop: any EventLoop
        var parts: [Part] = []
        /// Where each connection's part is in `parts`.
        var position: [UInt64: Int] = [:]

        mutating func part(_ connection: ConnectionRef) -> Int {
            if let known = position[connection.id] { return known }
            position[connection.id] = parts.count
            parts.append(Part(connection: connection))
            return parts.count - 1
        }
    }

    /// The loops with something to write, indexed by loop index (nil: nothing for that loop).
    let loops: [Loop?]
    /// The store's mailbox epoch (messages without one of their own are under it).
    let epoch: String

    /// Gathers `answers` (the binary ones) and `deliveries` per loop and connection.
    /// `elsewhere`: of the receivers not online here, those online on another node.
    init(answers: [UserMailboxState.Answer], deliveries: [UserMailboxState.Delivery], elsewhere: Set<UserKey>, epoch: String) {
        self.epoch = epoch
        var loops: [Loop?] = []
        // The last connection's place: a sender's replies and a receiver's messages come in runs.
        var last: (connection: ConnectionRef, loop: Int, part: Int)?
        func place(_ connection: ConnectionRef) -> (loop: Int, part: Int) {
            if let last, last.connection === connection { return (last.loop, last.part) }
            let index = connection.loopIndex
            if index >= loops.count { loops.append(contentsOf: repeatElement(nil, count: index + 1 - loops.count)) }
            if loops[index] == nil { loops[index] = Loop(loop: connection.channel.eventLoop) }
            let part = loops[index]!.part(connection)
            last = (connection, index, part)
            return (index, part)
        }
        for answer in answers {
            guard case .binary(let connection, let requestID, let tellsStatus) = answer.reply else { continue }
            let (loop, part) = place(connection)
            loops[loop]!.parts[part].replies.append(
                BinaryFrame.SendUserReply(requestID: requestID, msgId: UInt64(answer.id),
                                          receiverOnline: tellsStatus ? Self.receipt(answer, elsewhere: elsewhere).receiverOnline : nil))
        }
        for delivery in deliveries {
            let (loop, part) = place(delivery.connection)
            loops[loop]!.parts[part].binary = delivery.binary
            loops[loop]!.parts[part].messages.append(delivery.message)
        }
        self.loops = loops
    }

    /// The receipt of `answer`.
    static func receipt(_ answer: UserMailboxState.Answer, elsewhere: Set<UserKey>) -> UserMailbox.Receipt {
        UserMailbox.Receipt(id: answer.id, receiverOnline: answer.away.map { elsewhere.contains($0) } ?? true)
    }

    /// Hands each loop with work its part, to write there.
    func start() {
        for case let work? in loops {
            work.loop.execute { Self.write(work.parts, epoch: epoch) }
        }
    }

    /// On a loop: encodes and writes its parts, per connection in first-seen order, one flush
    /// each (the connection's outbox counts the bytes).
    private static func write(_ parts: [Part], epoch: String) {
        for part in parts {
            let connection = part.connection
            if !part.replies.isEmpty { writeReplies(part.replies, on: connection) }
            if !part.messages.isEmpty {
                if part.binary {
                    writeBinary(part.messages, epoch: epoch, on: connection)
                } else {
                    // One text frame per message (JSON), written whole like the binary ones: one
                    // flush for all of them, not one each.
                    for message in part.messages {
                        let json = FrameCodec.encode(jsonFrame(message, epoch: message.epoch ?? epoch), allocator: connection.channel.allocator)
                        let frame = EncodedFrame.text(json, allocator: connection.channel.allocator)
                        connection.writeEncoded(frame.buffer, fallback: frame.webSocketFrame)
                    }
                }
            }
            connection.channel.flush()
        }
    }

    /// `0x83` frames (a u16 count each: a larger list takes several), each encoded with its
    /// WebSocket header in one buffer and written below the frame encoder.
    private static func writeReplies(_ replies: [BinaryFrame.SendUserReply], on connection: ConnectionRef) {
        var start = 0
        while start < replies.count {
            let chunk = replies[start..<min(start + Int(UInt16.max), replies.count)]
            let frame = EncodedFrame.binary(allocator: connection.channel.allocator, capacity: 3 + 17 * chunk.count) {
                BinaryFrame.writeSendUserReplies(into: &$0, chunk)
            }
            connection.writeEncoded(frame.buffer, fallback: frame.webSocketFrame)
            start += chunk.count
        }
    }

    /// `0x84` frames of at most about 60 KB each, one per run of messages of one mailbox epoch,
    /// encoded as `writeReplies` does.
    private static func writeBinary(_ messages: [StoredUserMessage], epoch store: String, on connection: ConnectionRef) {
        var frame: [BinaryFrame.UserMessage] = []
        var size = 0
        var epoch = messages.first?.epoch ?? store
        func write() {
            guard !frame.isEmpty else { return }
            let encoded = EncodedFrame.binary(allocator: connection.channel.allocator, capacity: size + 3 + epoch.utf8.count) {
                BinaryFrame.writeUserMessages(into: &$0, epoch: epoch, frame)
            }
            connection.writeEncoded(encoded.buffer, fallback: encoded.webSocketFrame)
            frame.removeAll(keepingCapacity: true)
            size = 0
        }
        for message in messages {
            let item = binaryItem(message)
            let itemSize = 24 + item.publisher.utf8.count + (item.customType?.utf8.count ?? 0) + item.payload.readableBytes
            if size + itemSize > 60_000 || (message.epoch ?? store) != epoch { write() }
            epoch = message.epoch ?? store
            frame.append(item)
            size += itemSize
        }
        write()
    }

    private static func binaryItem(_ message: StoredUserMessage) -> BinaryFrame.UserMessage {
        let payload = message.text.map { ByteBuffer(string: $0) } ?? ByteBuffer(bytes: message.data ?? Data())
        return BinaryFrame.UserMessage(msgId: UInt64(message.id), ts: message.ts, publisher: message.sender,
                                       customType: message.customType, isText: message.text != nil, payload: payload)
    }

    private static func jsonFrame(_ message: StoredUserMessage, epoch: String) -> Frame {
        Frame(type: .message, channel: message.receiver, channelType: "user", publisher: message.sender,
              text: message.text, data: message.data, customType: message.customType, ts: message.ts,
              msgId: UInt64(message.id), epoch: epoch)
    }
}
