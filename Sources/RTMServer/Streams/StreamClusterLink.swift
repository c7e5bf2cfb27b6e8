/// How a node's stream channels reach the other nodes: the membership changes of its visible
/// members (`StreamClusterEvent`). A single node has nobody to tell (`LocalStreamLink`); a
/// cluster writes them to its backplane's log, and every node mirrors the others'
/// (`BackplaneStreamLink`, Cluster/). `StreamHub` never asks which one it has. (Topic messages
/// take the same way apart: `TopicPublishPath`.)
protocol StreamClusterLink: Sendable {
    /// Announces a membership change in `channel` to the other nodes. A channel's changes keep
    /// the order of the calls; `done` runs (on any thread) once stored, or failed.
    func announce(_ event: StreamClusterEvent, channel: ChannelKey, done: @escaping @Sendable (Result<Void, any Error>) -> Void)
    /// Tells the other nodes this run started: the members of this node's earlier run are gone.
    func announceStart()
    /// The channels this node announced members in: each gets a `sync` when the database link
    /// comes back, so that the other nodes learn what they missed, leaves included.
    func announcedChannels() -> Set<ChannelKey>
    /// The other nodes know this node has nobody in `channel`: it needs no more syncs.
    func forget(_ channel: ChannelKey)
    /// Waits (up to `limit`) until every change announced so far was stored or failed.
    func settle(within limit: Duration) async
}

/// A single node's link: no other node to tell, no other node's members to mirror.
struct LocalStreamLink: StreamClusterLink {
    func announce(_ event: StreamClusterEvent, channel: ChannelKey, done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        done(.success(()))
    }

    func announceStart() {}

    func announcedChannels() -> Set<ChannelKey> { [] }

    func forget(_ channel: ChannelKey) {}

    func settle(within limit: Duration) async {}
}
