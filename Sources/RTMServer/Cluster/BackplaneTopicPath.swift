import Logging
import NIOCore
import RTMProtocol

/// A cluster's topic path (`TopicPublishPath`): each message committed through the backplane
/// (`Hub.publishTopic`, one log channel per topic, each publisher's messages in order through
/// `BackplaneStreamLink`) and answered once committed; every node delivers what it reads back
/// (`Hub.deliverTopicMessages`). A message that could not be committed gets the same
/// `channelPublishMessageTimeout` as a channel publish (nothing stored), one that found too many
/// of its publisher's messages waiting `channelPublishMessageTooFrequent`.
struct BackplaneTopicPath: TopicPublishPath {
    let link: BackplaneStreamLink
    let logger: Logger

    func publish(_ frame: Frame, publisher: StreamMembership, topic: String, recipients: [ConnectionRef],
                 answer: @escaping @Sendable (RequestRefusal?) -> Void) -> TopicPublishOutcome {
        let logger = self.logger
        Hub.publishTopic(link, publisher: publisher, topic: topic, frame: frame) { result in
            switch result {
            case .success:
                answer(nil)
            case .failure(let error as TopicOutboxFull):
                answer(RequestRefusal(code: .channelPublishMessageTooFrequent, reason: error.description))
            case .failure(let error):
                logger.warning("a topic message through the cluster backplane failed", metadata: ["error": "\(error)"])
                answer(RequestRefusal(code: .channelPublishMessageTimeout, reason: ClusterCommitFailure.reason(error)))
            }
        }
        return .pending
    }
}
