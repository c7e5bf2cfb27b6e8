import NIOCore
import RTMProtocol

/// Where a STREAM connection's topic messages go (AGORA_REFERENCE §2.9), the stream side of
/// `PublishPath`: one node delivers at once to its members subscribed to the topic and
/// publisher (`LocalTopicPath`); a cluster commits through its backplane first, and every node,
/// the publisher's included, delivers what it reads back (`BackplaneTopicPath`, Cluster/). The
/// connection never asks which one it has.
protocol TopicPublishPath: Sendable {
    /// Publishes a validated topic message of `publisher`; `recipients` are this node's members
    /// subscribed to it. Called on the publisher's connection's loop. Either it is delivered
    /// at once (`.delivered`: the connection answers `ok` now and counts the deliveries), or
    /// `answer` is called later, on any thread, with nil (committed) or the refusal.
    func publish(_ frame: Frame, publisher: StreamMembership, topic: String, recipients: [ConnectionRef],
                 answer: @escaping @Sendable (RequestRefusal?) -> Void) -> TopicPublishOutcome
}

/// What `TopicPublishPath.publish` did.
enum TopicPublishOutcome: Equatable {
    /// Delivered now, to `count` connections, `bytes` written in all.
    case delivered(count: Int, bytes: Int)
    /// On its way: the answer comes later.
    case pending
}

/// A single node's topic path: the message encoded once and written to each local recipient.
struct LocalTopicPath: TopicPublishPath {
    func publish(_ frame: Frame, publisher: StreamMembership, topic: String, recipients: [ConnectionRef],
                 answer: @escaping @Sendable (RequestRefusal?) -> Void) -> TopicPublishOutcome {
        let message = Frame(type: .message, channel: publisher.channel.name, channelType: "stream", publisher: publisher.userId,
                            text: frame.text, data: frame.data, customType: frame.customType, ts: Hub.wallMillis).with { $0.topic = topic }
        let buffer = FrameCodec.encode(message)
        for recipient in recipients { Hub.sendEncoded(buffer, on: recipient.channel) }
        return .delivered(count: recipients.count, bytes: recipients.count &* buffer.readableBytes)
    }
}
