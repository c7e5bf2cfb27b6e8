import Foundation
import NIOCore
import RTMProtocol

/// What one event of the mailbox writes through the event loops: the binary `sendUser` replies
/// and the deliveries. Every loop with work gets the event's whole lists and writes its own
/// part (picked by loop index), gathered per connection (one frame each where they fit, one
/// flush per connection): a commit for a thousand receivers costs one hop per loop, and the
/// thread that ran the event (the store's) does no per-message work for them.
struct UserMessageWrites: Sendable {
    let answers: [UserMailboxState.Answer]
    let deliveries: [UserMailboxState.Delivery]
    /// Of the receivers not online here, those online on another node.
    let elsewhere: Set<UserKey>
    /// The store's mailbox epoch (messages without one of their own are under it).
    let epoch: String

    /// The loops with something to write, by index.
    func loops() -> [Int: any EventLoop] {
        var loops: [Int: any EventLoop] = [:]
        for answer in answers {
            if case .binary(let connection, _, _) = answer.reply, loops[connection.loopIndex] == nil {
                loops[connection.loopIndex] = connection.channel.eventLoop
            }
        }
        for delivery in deliveries where loops[delivery.connection.loopIndex] == nil {
            loops[delivery.connection.loopIndex] = delivery.connection.channel.eventLoop
        }
        return loops
    }

    /// The receipt of `answer`.
    func receipt(_ answer: UserMailboxState.Answer) -> UserMailbox.Receipt {
        UserMailbox.Receipt(id: answer.id, receiverOnline: answer.away.map { elsewhere.contains($0) } ?? true)
    }

    /// On loop `index`: encodes and writes its part, per connection in first-seen order, one
    /// flush each (the connection's outbox counts the bytes).
    func run(loop index: Int) {
        var order: [ConnectionRef] = []
        var repliesOf: [UInt64: [BinaryFrame.SendUserReply]] = [:]
        var messagesOf: [UInt64: (binary: Bool, messages: [StoredUserMessage])] = [:]
        for answer in answers {
            guard case .binary(let connection, let requestID, let tellsStatus) = answer.reply, connection.loopIndex == index else { continue }
            if repliesOf[connection.id] == nil { order.append(connection) }
            repliesOf[connection.id, default: []].append(
                BinaryFrame.SendUserReply(requestID: requestID, msgId: UInt64(answer.id),
                                          receiverOnline: tellsStatus ? receipt(answer).receiverOnline : nil))
        }
        for delivery in deliveries where delivery.connection.loopIndex == index {
            let id = delivery.connection.id
            if repliesOf[id] == nil, messagesOf[id] == nil { order.append(delivery.connection) }
            messagesOf[id, default: (delivery.binary, [])].messages.append(delivery.message)
        }
        for connection in order {
            if let list = repliesOf[connection.id] { Self.writeReplies(list, on: connection) }
            if let (binary, messages) = messagesOf[connection.id] {
                if binary {
                    Self.writeBinary(messages, epoch: epoch, on: connection)
                } else {
                    // One text frame per message (JSON), written whole like the binary ones: one
                    // flush for all of them, not one each.
                    for message in messages {
                        let json = FrameCodec.encode(Self.jsonFrame(message, epoch: message.epoch ?? epoch), allocator: connection.channel.allocator)
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
