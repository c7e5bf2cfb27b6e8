import NIOCore
import RTMProtocol

extension ConnectionHandler {
    /// A topic message in cluster mode (`Hub.publishTopic`): `ok` once committed, the same
    /// `channelPublishMessageTimeout` as a channel publish when it was not (nothing stored), or
    /// `channelPublishMessageTooFrequent` when too many of the publisher's wait already.
    func publishTopicThroughBackplane(_ link: StreamClusterLink, _ frame: Frame, membership: StreamMembership, topic: String) {
        let channel = connection.channel, logger = hub.logger, hub = self.hub
        let id = frame.id, name = membership.channel.name
        hub.publishTopic(link, publisher: membership, topic: topic, frame: frame) { result in
            switch result {
            case .success:
                Hub.send(Frame(type: .ok, id: id, channel: name).with { $0.topic = topic }, on: channel)
            case .failure(let error as TopicOutboxFull):
                hub.reply(.error(id: id, .channelPublishMessageTooFrequent, error.description), to: .publishTopic, on: channel)
            case .failure(let error):
                logger.warning("a topic message through the cluster backplane failed", metadata: ["error": "\(error)"])
                hub.reply(.error(id: id, .channelPublishMessageTimeout, ClusterCommitFailure.reason(error)), to: .publishTopic, on: channel)
            }
        }
    }
}
