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
    /// The other nodes declared **this** node dead (it could not renew its lease in time: it
    /// was paused, or cut off from the database): its sessions are theirs now (grace windows,
    /// then timeouts). The node sends its clients away and the backplane joins the cluster
    /// again once this event has been handled; until then it commits nothing.
    case fenced
    /// This node could not renew its lease before it ran out by its own clock: it is cut off
    /// from the database, or the database is down for every node. Reported at every failed
    /// round while it lasts, with the other live nodes' addresses as last read (`peers`,
    /// "host:port"): the node asks them (`/health`) which it is. Cut off while they reach the
    /// database, it is declared dead there and sends its clients to them (`PartitionWatch`).
    case leaseLapsed(peers: [String])
    /// This node renewed its lease again after `leaseLapsed` (declared dead meanwhile or not).
    case leaseRenewed
    /// Where the channels' numbering stands (SPEC M-2): sent before any message when following
    /// starts, with every channel's position, and again (with none) when the epoch a channel's
    /// first message gets changes (the database failed over). A node answers a subscribe to a
    /// channel it holds nothing of with these, so that the position it gives is the cluster's.
    case positions(BackplanePositions)
    /// Channels this node follows from now on (`ChannelBackplane.follow`): where each stands,
    /// before any of its messages.
    case following([BackplaneFollowStart])
}

/// Where the channels' numbering stands in the backplane (`BackplaneEvent.positions`).
public struct BackplanePositions: Sendable {
    /// One channel's epoch and last number.
    public struct Channel: Sendable, Equatable {
        public var appId: String
        public var channel: String
        public var epoch: String
        public var seq: UInt64

        public init(appId: String, channel: String, epoch: String, seq: UInt64) {
            self.appId = appId
            self.channel = channel
            self.epoch = epoch
            self.seq = seq
        }
    }

    /// A publisher's message id and the number its message got (M-3).
    public struct RecentId: Sendable, Equatable {
        public var appId: String
        public var publisher: String
        public var msgId: UInt64
        public var seq: UInt64

        public init(appId: String, publisher: String, msgId: UInt64, seq: UInt64) {
            self.appId = appId
            self.publisher = publisher
            self.msgId = msgId
            self.seq = seq
        }
    }

    /// Channels with messages, as committed when following started (empty later).
    public var channels: [Channel]
    /// The epoch the first message of a channel without messages gets now: the same on every
    /// node.
    public var firstEpoch: String
    /// Message ids committed within the resend window before following started, in commit
    /// order (empty later): a node started after a message was committed recognises its
    /// resend as the nodes that read it do (M-3).
    public var recentIds: [RecentId]

    public init(channels: [Channel], firstEpoch: String, recentIds: [RecentId] = []) {
        self.channels = channels
        self.firstEpoch = firstEpoch
        self.recentIds = recentIds
    }
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
