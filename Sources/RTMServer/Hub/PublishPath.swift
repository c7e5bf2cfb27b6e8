import NIOCore

/// How channel messages get their numbers (SPEC M-2, M-3): the one seam between publishers
/// and a channel's log. One node numbers and fans out at once, in memory (`LocalPublishPath`);
/// a cluster commits through its backplane first and answers after the commit
/// (`BackplanePublishPath`, Cluster/), and every node, the publisher's included, delivers what
/// the backplane hands back. Connections and the admin API publish through it and never ask
/// which one they have.
protocol PublishPath: Sendable {
    /// A connection's publisher, confined to the connection's event loop (a cluster's keeps
    /// the connection's runs in order, one commit at a time per channel).
    func makeConnectionPublisher() -> any ConnectionPublisher
    /// Publishes messages outside any connection (the admin API): their numbers and the
    /// channel's epoch.
    func publish(_ messages: [Hub.Outgoing], channel: ChannelKey, publisher: UserKey, hub: Hub) async throws
        -> (seqs: [UInt64], epoch: String)
}

/// A run's sequence numbers, in run order, and the channel epoch they belong to (SPEC M-2):
/// what its acknowledgements carry.
typealias PublishNumbers = (seqs: [UInt64], epoch: String)

/// What happens to a run of publishes once it has its numbers, or has failed: called on the
/// connection's event loop with the run. A closure with no captures (the publish fast path
/// passes a static one: nothing is allocated per run).
typealias PublishCompletion = (ConnectionHandler, ChannelHandlerContext, [Hub.Outgoing], Result<PublishNumbers, any Error>) -> Void

/// One connection's way into the `PublishPath`.
protocol ConnectionPublisher: AnyObject {
    /// Publishes `run` (one publisher, one channel, in read order). Returns the numbers and
    /// their channel epoch when they are known at once (one node: numbered and fanned out);
    /// otherwise nil, and `completion` is called later on the connection's loop.
    func publish(_ run: [Hub.Outgoing], channel: String, publisher: UserKey, handler: ConnectionHandler,
                 context: ChannelHandlerContext, completion: @escaping PublishCompletion) -> PublishNumbers?
}

/// A single node's publish path: numbered, fanned out to the local subscribers and answered in
/// one step (`Hub.publish`: one lock, one encoded buffer, one hop per event loop). Stateless:
/// every connection shares the one instance.
final class LocalPublishPath: PublishPath, ConnectionPublisher, Sendable {
    func makeConnectionPublisher() -> any ConnectionPublisher { self }

    func publish(_ messages: [Hub.Outgoing], channel: ChannelKey, publisher: UserKey, hub: Hub) -> (seqs: [UInt64], epoch: String) {
        hub.publish(appId: channel.appId, channel: channel.name, publisher: publisher, messages: messages, allocator: ByteBufferAllocator())
    }

    func publish(_ run: [Hub.Outgoing], channel: String, publisher: UserKey, handler: ConnectionHandler,
                 context: ChannelHandlerContext, completion: @escaping PublishCompletion) -> PublishNumbers? {
        handler.hub.publish(appId: publisher.appId, channel: channel, publisher: publisher, messages: run, allocator: context.channel.allocator)
    }
}
