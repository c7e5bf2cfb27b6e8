import NIOCore
import RTMProtocol

/// Cluster mode: a run of publishes goes through the backplane and is acknowledged
/// once committed, with the cluster's sequence numbers; binary publishes in one binary ack
/// frame, JSON ones with their `ok` replies, as on the single-node path. A failed commit
/// answers every publish of the run with `channelPublishMessageTimeout` (nothing was stored).
extension ConnectionHandler {
    func publishThroughBackplane(_ backplane: any ChannelBackplane, _ run: [Hub.Outgoing], channel: String, key: UserKey,
                                 context: ChannelHandlerContext) {
        publishThroughBackplane(backplane, run, channel: channel, key: key, context: context) { handler, context, result in
            handler.acknowledgeCommitted(run, result: result.map(\.seqs), context: context)
        }
    }

    /// A run waiting for its turn through the backplane, and what to do with its outcome.
    struct ClusterPublishRun {
        let messages: [Hub.Outgoing]
        let then: (ConnectionHandler, ChannelHandlerContext, Result<(seqs: [UInt64], epoch: String?), any Error>) -> Void
    }

    /// Publishes `run` through the backplane; `then` runs on this connection's event loop with
    /// the sequence numbers and the channel's epoch (nil when every message was a resend).
    /// A channel's runs go in read order, one call at a time (`ClusterPublishQueue`, M-3).
    func publishThroughBackplane(_ backplane: any ChannelBackplane, _ run: [Hub.Outgoing], channel: String, key: UserKey,
                                 context: ChannelHandlerContext,
                                 then: @escaping (ConnectionHandler, ChannelHandlerContext, Result<(seqs: [UInt64], epoch: String?), any Error>) -> Void) {
        guard let runs = clusterPublishes.add(ClusterPublishRun(messages: run, then: then), channel: channel) else { return }
        commitThroughBackplane(backplane, runs, channel: channel, key: key, context: context)
    }

    /// One backplane call for `runs` (one channel), then the next runs of the channel, if any.
    private func commitThroughBackplane(_ backplane: any ChannelBackplane, _ runs: [ClusterPublishRun], channel: String, key: UserKey,
                                        context: ChannelHandlerContext) {
        let hub = self.hub
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context, runs), eventLoop: loop)
        let messages = runs.count == 1 ? runs[0].messages : runs.flatMap(\.messages)
        Task {
            let result: Result<(seqs: [UInt64], epoch: String?), any Error>
            do {
                result = .success(try await hub.publishThroughBackplane(backplane, appId: key.appId, channel: channel,
                                                                          publisher: key, messages: messages))
            } catch {
                result = .failure(error)
            }
            loop.execute {
                let (handler, context, runs) = bound.value
                var start = 0
                for run in runs {
                    let end = start + run.messages.count
                    run.then(handler, context, result.map { (Array($0.seqs[start..<end]), $0.epoch) })
                    start = end
                }
                if let next = handler.clusterPublishes.finished(channel: channel) {
                    handler.commitThroughBackplane(backplane, next, channel: channel, key: key, context: context)
                }
            }
        }
    }

    /// A JSON publish request (`ConnectionHandler+Requests`) in cluster mode: `ok` with the
    /// cluster's number after the commit, then the history record if asked for (keyed by
    /// epoch and number, as on a single node).
    func publishRequestThroughBackplane(_ backplane: any ChannelBackplane, _ outgoing: Hub.Outgoing, frame: Frame, channel: String,
                                        key: UserKey, context: ChannelHandlerContext) {
        publishThroughBackplane(backplane, [outgoing], channel: channel, key: key, context: context) { handler, context, result in
            switch result {
            case .failure:
                handler.acknowledgeCommitted([outgoing], result: result.map(\.seqs), context: context)
            case .success(let (seqs, epoch)):
                let reply = Frame(type: .ok, id: frame.id, seq: seqs[0])
                guard frame.storeInHistory == true else { return handler.send(reply, context: context) }
                let epoch = epoch ?? handler.hub.channelPosition(appId: key.appId, channel: channel).epoch
                handler.storeInHistory(appId: key.appId, channelType: "message", channel: channel, publisher: key.userId, frame: frame,
                                       dedupKey: "\(epoch):\(seqs[0])", reply: reply, context: context)
            }
        }
    }

    /// Answers a committed (or failed) run of publishes.
    private func acknowledgeCommitted(_ run: [Hub.Outgoing], result: Result<[UInt64], any Error>, context: ChannelHandlerContext) {
        switch result {
        case .failure(let error):
            // Logged once per change of the link (`ClusterStatus`), counted here: an outage
            // refuses every publish, and a warning each would flood the log.
            hub.cluster.publishesFailed(run.count)
            let reason = ClusterCommitFailure.reason(error)
            for message in run {
                send(.error(id: message.requestID, .channelPublishMessageTimeout, reason), context: context)
            }
        case .success(let seqs):
            var acks: [(requestID: UInt64, seq: UInt64)] = []
            var replies: ByteBuffer?
            for (message, seq) in zip(run, seqs) {
                if message.repliesInJSON {
                    Self.appendPublishOK(id: message.requestID, seq: seq, to: &replies, expected: run.count, allocator: context.channel.allocator)
                } else {
                    acks.append((message.requestID, seq))
                }
            }
            writeReplies(&replies, context: context)
            writePublishAcks(acks, context: context)
        }
    }
}
