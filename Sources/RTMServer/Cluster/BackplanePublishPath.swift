import NIOCore
import RTMProtocol

/// A cluster node's publish path: a run of publishes is committed through the backplane and
/// answered once committed, with the cluster's numbers; nothing is fanned out here (every
/// node, this one included, delivers what the backplane hands back: `Hub.applyCommitted`).
struct BackplanePublishPath: PublishPath {
    let backplane: any ChannelBackplane
    let status: ClusterStatus

    func makeConnectionPublisher() -> any ConnectionPublisher {
        BackplaneConnectionPublisher(backplane: backplane, status: status)
    }

    func publish(_ messages: [Hub.Outgoing], channel: ChannelKey, publisher: UserKey, hub: Hub) async throws -> (seqs: [UInt64], epoch: String) {
        let (seqs, epoch) = try await hub.publishThroughBackplane(backplane, appId: channel.appId, channel: channel.name,
                                                                  publisher: publisher, messages: messages)
        return (seqs, hub.epoch(epoch, appId: channel.appId, channel: channel.name))
    }
}

/// One connection's publishes through the backplane: a channel's runs go in read order, one
/// call at a time, the runs read meanwhile together in the next call (`ClusterPublishQueue`,
/// M-3). Confined to the connection's event loop. A connection accepted before the others
/// last declared this node dead commits nothing more (`BackplaneEvent.fenced`): its session is
/// the cluster's to time out or resume elsewhere.
final class BackplaneConnectionPublisher: ConnectionPublisher {
    /// A run waiting for its turn, and what to do with its outcome.
    private struct Run {
        let messages: [Hub.Outgoing]
        let completion: PublishCompletion
    }

    private let backplane: any ChannelBackplane
    private let status: ClusterStatus
    /// `status.fenceCount` when the connection was accepted.
    private let fences: Int
    private var queue = ClusterPublishQueue<Run>()

    init(backplane: any ChannelBackplane, status: ClusterStatus) {
        self.backplane = backplane
        self.status = status
        self.fences = status.fenceCount
    }

    func publish(_ run: [Hub.Outgoing], channel: String, publisher: UserKey, handler: ConnectionHandler,
                 context: ChannelHandlerContext, completion: @escaping PublishCompletion) -> PublishNumbers? {
        if let runs = queue.add(Run(messages: run, completion: completion), channel: channel) {
            commit(runs, channel: channel, publisher: publisher, handler: handler, context: context)
        }
        return nil
    }

    /// One backplane call for `runs` (one channel), then the next runs of the channel, if any.
    private func commit(_ runs: [Run], channel: String, publisher: UserKey, handler: ConnectionHandler, context: ChannelHandlerContext) {
        let hub = handler.hub
        let backplane = self.backplane, status = self.status, fences = self.fences
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, handler, context, runs), eventLoop: loop)
        let messages = runs.count == 1 ? runs[0].messages : runs.flatMap(\.messages)
        Task {
            let result: Result<(seqs: [UInt64], epoch: String?), any Error>
            do {
                result = .success(try await status.committing(accepted: fences) {
                    try await hub.publishThroughBackplane(backplane, appId: publisher.appId, channel: channel,
                                                          publisher: publisher, messages: messages)
                })
            } catch {
                result = .failure(error)
            }
            loop.execute {
                let (publisherSelf, handler, context, runs) = bound.value
                let numbered = result.map { committed -> PublishNumbers in
                    (committed.seqs, hub.epoch(committed.epoch, appId: publisher.appId, channel: channel))
                }
                var start = 0
                for run in runs {
                    let end = start + run.messages.count
                    run.completion(handler, context, run.messages, numbered.map { (Array($0.seqs[start..<end]), $0.epoch) })
                    start = end
                }
                if let next = publisherSelf.queue.finished(channel: channel) {
                    publisherSelf.commit(next, channel: channel, publisher: publisher, handler: handler, context: context)
                }
            }
        }
    }
}
