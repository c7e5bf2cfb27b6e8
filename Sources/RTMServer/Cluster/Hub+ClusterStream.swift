import Foundation
import NIOCore
import NIOWebSocket
import RTMProtocol

/// Cluster mode: stream channels cross nodes through the same backplane as channel
/// messages, under log channel names no user channel can have (names never contain `/`,
/// `Limits.allowedPunctuation`):
/// - `/stream/<channel>/<topic>`: the topic's messages. One log channel per (stream channel,
///   topic), so the backplane keeps a topic's messages in one order, and each publisher's in
///   its publishing order (`BackplaneStreamLink`). Every node, the publisher's included, delivers
///   what it reads back to its own members subscribed to that topic and publisher: exactly
///   once, as channel messages are.
/// - `/stream/<channel>`: membership changes (`StreamClusterEvent`), mirrored by every node
///   (`StreamState+Remote`): presence and topic events, snapshots with the remote members.
/// - `/stream/`: node starts.
extension Hub {
    /// The prefix of the stream channels' log channels.
    static let topicLogPrefix = "/stream/"

    /// What a stream log channel carries.
    enum StreamLogTarget: Equatable {
        case topic(channel: String, topic: String)
        case members(channel: String)
        case nodes
    }

    /// The log channel of `topic` in stream channel `channel`.
    static func topicLogChannel(_ channel: String, topic: String) -> String {
        topicLogPrefix + channel + "/" + topic
    }

    /// The log channel of stream channel `channel`'s membership changes.
    static func streamLogChannel(_ channel: String) -> String {
        topicLogPrefix + channel
    }

    /// What a log channel carries; nil for a user channel.
    static func streamTarget(ofLogChannel name: String) -> StreamLogTarget? {
        guard name.utf8.first == UInt8(ascii: "/"), name.hasPrefix(topicLogPrefix) else { return nil }
        let rest = name.dropFirst(topicLogPrefix.count)
        if rest.isEmpty { return .nodes }
        guard let slash = rest.firstIndex(of: "/") else { return .members(channel: String(rest)) }
        return .topic(channel: String(rest[..<slash]), topic: String(rest[rest.index(after: slash)...]))
    }

    /// Queues a topic message of `publisher` for the backplane; `done` runs (on any thread)
    /// once it is committed, or failed, or refused.
    static func publishTopic(_ link: BackplaneStreamLink, publisher: StreamMembership, topic: String, frame: Frame,
                             done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        var payload = ByteBuffer()
        if let text = frame.text { payload.writeString(text) } else if let data = frame.data { payload.writeBytes(data) }
        let publish = BackplanePublish(appId: publisher.channel.appId, channel: Self.topicLogChannel(publisher.channel.name, topic: topic),
                                       publisher: publisher.userId, msgId: nil, customType: frame.customType, isText: frame.text != nil,
                                       payload: payload, millis: Self.wallMillis)
        link.send(publish, for: publisher, done: done)
    }

    /// Applies the stream channels' messages among `messages` (topic messages to this node's
    /// subscribers, membership changes to the mirror) and returns the others (channel
    /// messages), in their order. Nothing is copied when there are none.
    func deliverTopicMessages(_ messages: [BackplaneMessage]) -> [BackplaneMessage] {
        guard messages.contains(where: { $0.channel.utf8.first == UInt8(ascii: "/") }) else { return messages }
        var rest: [BackplaneMessage] = []
        rest.reserveCapacity(messages.count)
        for message in messages {
            switch Self.streamTarget(ofLogChannel: message.channel) {
            case nil:
                rest.append(message)
            case .topic(let channel, let topic):
                deliverTopicMessage(message, channel: ChannelKey(appId: message.appId, name: channel), topic: topic)
            case .members(let channel):
                guard let event = try? JSONDecoder().decode(StreamClusterEvent.self, from: Data(message.payload.readableBytesView)) else { continue }
                streams.applyRemote(event, channel: ChannelKey(appId: message.appId, name: channel), node: message.node ?? "")
            case .nodes:
                guard let event = try? JSONDecoder().decode(StreamClusterEvent.self, from: Data(message.payload.readableBytesView)) else { continue }
                streams.remoteNodeStarted(message.node ?? "", instance: event.instance)
            }
        }
        return rest
    }

    /// One committed topic message: encoded once, written to every local member subscribed to
    /// its topic and publisher (the publisher's own user never gets it, as on one node).
    private func deliverTopicMessage(_ message: BackplaneMessage, channel: ChannelKey, topic: String) {
        let recipients = streams.subscribers(of: channel, topic: topic, publisher: message.publisher)
        guard !recipients.isEmpty else { return }
        var payload = message.payload
        let text = message.isText ? payload.readString(length: payload.readableBytes) : nil
        let data = message.isText ? nil : Data(payload.readableBytesView)
        let frame = Frame(type: .message, channel: channel.name, channelType: "stream", publisher: message.publisher,
                          text: text, data: data, customType: message.customType, ts: message.millis).with { $0.topic = topic }
        let websocketFrame = WebSocketFrame(fin: true, opcode: .text, data: FrameCodec.encode(frame))
        // One hop per event loop with recipients: written there, flushed once per loop tick,
        // counted in that loop's stats as a single node's topic fan-out is.
        var byLoop: [Int: [ConnectionRef]] = [:]
        for recipient in recipients { byLoop[recipient.loopIndex, default: []].append(recipient) }
        for (index, group) in byLoop where index < fanouts.count {
            let fanout = fanouts[index]
            fanout.eventLoop.execute {
                for recipient in group { fanout.write(websocketFrame, to: recipient) }
                fanout.stats.streamMessagesOut &+= group.count
                fanout.stats.bytesOut &+= group.count &* websocketFrame.data.readableBytes
            }
        }
    }

    /// Gaps of stream log channels are dropped (topic messages have no numbers, replay or gap
    /// notices on the wire, §2.9); the others are returned.
    func dropTopicGaps(_ gaps: [BackplaneGap]) -> [BackplaneGap] {
        gaps.filter { gap in
            guard Self.streamTarget(ofLogChannel: gap.channel) != nil else { return true }
            logger.warning("stream channel messages lost across the cluster", metadata: ["channel": "\(gap.appId)\(gap.channel)", "count": "\(gap.count.map(String.init) ?? "unknown (a new epoch)")"])
            return false
        }
    }
}
