import Foundation
import NIOCore
import RTMProtocol

/// Cluster mode (issue 13): topic messages of stream channels cross nodes through the same
/// backplane as channel messages, under log channel names no user channel can have
/// (`/stream/<channel>/<topic>`: names never contain `/`, `Limits.allowedPunctuation`). Each
/// (stream channel, topic) is one log channel, so the backplane keeps a topic's messages in one
/// order, and each publisher's in its publishing order (`TopicOutbox`). Every node, the
/// publisher's included, delivers what it reads back to its own members subscribed to that
/// topic and publisher: exactly once, as channel messages are.
///
/// Topic membership (joinTopic/leaveTopic events, the topic snapshot) and stream presence stay
/// per node: a subscription names publishers by user id, so it needs no remote state.
extension Hub {
    /// The log channel prefix of topic messages.
    static let topicLogPrefix = "/stream/"

    /// The log channel of `topic` in stream channel `channel`.
    static func topicLogChannel(_ channel: String, topic: String) -> String {
        topicLogPrefix + channel + "/" + topic
    }

    /// The stream channel and topic of a log channel; nil for a user channel.
    static func streamTopic(ofLogChannel name: String) -> (channel: String, topic: String)? {
        guard name.utf8.first == UInt8(ascii: "/"), name.hasPrefix(topicLogPrefix) else { return nil }
        let rest = name.dropFirst(topicLogPrefix.count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        return (String(rest[..<slash]), String(rest[rest.index(after: slash)...]))
    }

    /// Queues a topic message of `publisher` for the backplane; `done` runs (on any thread)
    /// once it is committed, or failed (nothing stored), or refused at once (the database is
    /// known to be down, or `publisher` has too many messages waiting).
    func publishTopic(_ backplane: any ChannelBackplane, publisher: StreamMembership, topic: String, frame: Frame,
                      done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        guard cluster.databaseUp else { return done(.failure(DatabaseLinkDown())) }
        var payload = ByteBuffer()
        if let text = frame.text { payload.writeString(text) } else if let data = frame.data { payload.writeBytes(data) }
        let publish = BackplanePublish(appId: publisher.channel.appId, channel: Self.topicLogChannel(publisher.channel.name, topic: topic),
                                       publisher: publisher.userId, msgId: nil, customType: frame.customType, isText: frame.text != nil,
                                       payload: payload, millis: Self.wallMillis)
        switch topicOutbox.add(TopicOutbox.Item(publish: publish, done: done), for: publisher) {
        case .queued:
            break
        case .full:
            done(.failure(TopicOutboxFull(capacity: topicOutbox.capacity)))
        case .startDrain:
            Task { await drainTopics(backplane, publisher: publisher) }
        }
    }

    /// Commits `publisher`'s waiting topic messages, one transaction at a time, until none wait.
    private func drainTopics(_ backplane: any ChannelBackplane, publisher: StreamMembership) async {
        while let items = topicOutbox.take(for: publisher) {
            let started = NIODeadline.now()
            do {
                _ = try await backplane.publish(items.map(\.publish))
                cluster.committed(nanoseconds: (NIODeadline.now() - started).nanoseconds)
                cluster.setDatabase(up: true, reason: "a topic message was committed")
                for item in items { item.done(.success(())) }
            } catch {
                cluster.setDatabase(up: false, reason: "a topic message could not be committed: \(error)")
                for item in items { item.done(.failure(error)) }
            }
        }
    }

    /// Delivers the topic messages among `messages` to this node's subscribers and returns the
    /// others (channel messages), in their order. Nothing is copied when there are none.
    func deliverTopicMessages(_ messages: [BackplaneMessage]) -> [BackplaneMessage] {
        guard messages.contains(where: { $0.channel.utf8.first == UInt8(ascii: "/") }) else { return messages }
        var rest: [BackplaneMessage] = []
        rest.reserveCapacity(messages.count)
        for message in messages {
            guard let (channel, topic) = Self.streamTopic(ofLogChannel: message.channel) else {
                rest.append(message)
                continue
            }
            deliverTopicMessage(message, channel: ChannelKey(appId: message.appId, name: channel), topic: topic)
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
        let buffer = FrameCodec.encode(frame)
        for recipient in recipients { Hub.sendEncoded(buffer, on: recipient.channel) }
    }

    /// Gaps of topic log channels are dropped (topic messages have no numbers, replay or gap
    /// notices on the wire, §2.9); the others are returned.
    func dropTopicGaps(_ gaps: [BackplaneGap]) -> [BackplaneGap] {
        gaps.filter { gap in
            guard Self.streamTopic(ofLogChannel: gap.channel) != nil else { return true }
            logger.warning("topic messages lost across the cluster", metadata: ["channel": "\(gap.appId)\(gap.channel)", "count": "\(gap.count)"])
            return false
        }
    }
}

/// A publisher has `capacity` topic messages waiting for the cluster's database already.
struct TopicOutboxFull: Error, CustomStringConvertible {
    let capacity: Int
    var description: String { "\(capacity) topic messages of this publisher are waiting for the cluster's database already" }
}
