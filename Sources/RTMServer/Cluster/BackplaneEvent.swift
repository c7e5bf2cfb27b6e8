/// What a `ChannelBackplane` reports to its node, one event at a time.
public enum BackplaneEvent: Sendable {
    /// Committed messages (any node's), in each channel's sequence order.
    case messages([BackplaneMessage])
    /// Numbers of a channel that will never arrive (the backplane gave up on them after its
    /// hold-back window): the node's subscribers get a `gap` notice and the channel moves past
    /// them (SPEC M-2).
    case gaps([BackplaneGap])
    /// The link to the shared database came up (`true`) or went down (`false`).
    case link(up: Bool)
    /// How many nodes hold a live lease now (this one included).
    case liveNodes(Int)
    /// A node's lease passed without renewal: the node is dead (kill -9, lost host, cut off).
    case nodeDied(node: String)
    /// A node declared dead renewed its lease again.
    case nodeReturned(node: String)
}

/// A run of a channel's sequence numbers that will never be delivered.
public struct BackplaneGap: Sendable, Equatable {
    public var appId: String
    public var channel: String
    /// The channel's epoch (the epoch of the messages after the gap).
    public var epoch: String
    /// The first and last missing numbers (`to < from`: unknown, the channel's new epoch
    /// starts after the gap: the database failed over).
    public var from: UInt64
    public var to: UInt64

    public init(appId: String, channel: String, epoch: String, from: UInt64, to: UInt64) {
        self.appId = appId
        self.channel = channel
        self.epoch = epoch
        self.from = from
        self.to = to
    }

    /// How many numbers are missing; nil when unknown (a new epoch).
    public var count: Int? { to >= from ? Int(to - from + 1) : nil }
}
