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
///
/// Every run is answered within the backplane's `publishDeadline` of its arrival, however many
/// are pipelined behind a call that does not end (a node cut off from its database): one timer
/// per connection, armed while runs are open, answers the overdue ones: refused with nothing
/// stored if their call has not left, with the outcome unknown if it has (M-3: a resend with
/// the same msgId is recognised). The call's own answer is then dropped.
final class BackplaneConnectionPublisher: ConnectionPublisher {
    /// A run waiting for its turn or its answer, and what to do with its outcome.
    private final class Run {
        let messages: [Hub.Outgoing]
        let completion: PublishCompletion
        /// When it must be answered.
        let due: NIODeadline
        /// Its call has left for the backplane.
        var sent = false
        var answered = false

        init(messages: [Hub.Outgoing], completion: @escaping PublishCompletion, due: NIODeadline) {
            self.messages = messages
            self.completion = completion
            self.due = due
        }
    }

    private let backplane: any ChannelBackplane
    private let status: ClusterStatus
    /// `status.fenceCount` when the connection was accepted.
    private let fences: Int
    private var queue = ClusterPublishQueue<Run>()
    /// Runs not answered yet, in arrival order (answered ones leave when they reach the front).
    private var open = CircularBuffer<Run>()
    /// A wake-up is scheduled at the first open run's deadline (while `open` is not empty).
    private var deadlineArmed = false

    init(backplane: any ChannelBackplane, status: ClusterStatus) {
        self.backplane = backplane
        self.status = status
        self.fences = status.fenceCount
    }

    func publish(_ run: [Hub.Outgoing], channel: String, publisher: UserKey, handler: ConnectionHandler,
                 context: ChannelHandlerContext, completion: @escaping PublishCompletion) -> PublishNumbers? {
        let entry = Run(messages: run, completion: completion, due: .now() + backplane.publishDeadline)
        open.append(entry)
        if !deadlineArmed { armDeadline(handler: handler, context: context) }
        if let runs = queue.add(entry, channel: channel) {
            commit(runs, channel: channel, publisher: publisher, handler: handler, context: context)
        }
        return nil
    }

    /// One backplane call for `runs` (one channel), then the next runs of the channel, if any.
    private func commit(_ runs: [Run], channel: String, publisher: UserKey, handler: ConnectionHandler, context: ChannelHandlerContext) {
        // Runs refused at their deadline while they waited never leave ("nothing was stored").
        let runs = runs.filter { !$0.answered }
        guard !runs.isEmpty else {
            if let next = queue.finished(channel: channel) { commit(next, channel: channel, publisher: publisher, handler: handler, context: context) }
            return
        }
        let hub = handler.hub
        let backplane = self.backplane, status = self.status, fences = self.fences
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, handler, context, runs), eventLoop: loop)
        let messages = runs.count == 1 ? runs[0].messages : runs.flatMap(\.messages)
        for run in runs { run.sent = true }
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
                    if !run.answered {
                        run.answered = true
                        run.completion(handler, context, run.messages, numbered.map { (Array($0.seqs[start..<end]), $0.epoch) })
                    }
                    start = end
                }
                publisherSelf.dropAnswered()
                if let next = publisherSelf.queue.finished(channel: channel) {
                    publisherSelf.commit(next, channel: channel, publisher: publisher, handler: handler, context: context)
                }
            }
        }
    }

    private func dropAnswered() {
        while let first = open.first, first.answered { open.removeFirst() }
    }

    /// Arms the timer at the first open run's deadline; at it, answers every overdue run.
    private func armDeadline(handler: ConnectionHandler, context: ChannelHandlerContext) {
        dropAnswered()
        guard let first = open.first else {
            deadlineArmed = false
            return
        }
        deadlineArmed = true
        let bound = NIOLoopBound((self, handler, context), eventLoop: context.eventLoop)
        let seconds = Double(backplane.publishDeadline.nanoseconds) / 1e9
        context.eventLoop.scheduleTask(deadline: first.due) {
            let (publisherSelf, handler, context) = bound.value
            let now = NIODeadline.now()
            for run in publisherSelf.open where !run.answered && run.due <= now {
                run.answered = true
                run.completion(handler, context, run.messages, .failure(PublishDeadlinePassed(seconds: seconds, sent: run.sent)))
            }
            publisherSelf.armDeadline(handler: handler, context: context)
        }
    }
}

/// A cluster publish not answered within the backplane's `publishDeadline` of its arrival.
struct PublishDeadlinePassed: Error {
    /// The deadline, in seconds.
    let seconds: Double
    /// Its call had left for the database (the outcome is unknown); false: it never left.
    let sent: Bool
}
