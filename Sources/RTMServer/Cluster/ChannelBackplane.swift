import NIOCore
import RTMProtocol

/// How channel messages cross nodes: the seam between the server core and a shared
/// engine. Without one (`ServerConfiguration.backplane == nil`, the default) the server is a
/// single node and publishes take the in-memory `LocalPublishPath` (sequence, fan-out and ack
/// in one step). With one (`BackplanePublishPath`), a publish is appended through the
/// backplane, acknowledged after its commit with the backplane's sequence numbers, and
/// delivered on **every** node, the publisher's included, only when the backplane hands it
/// back (`start(events:)`).
///
/// RTMServer does not depend on any implementation: `RTMPostgres` provides the PostgreSQL one
/// (`PostgresChannelBackplane`), and `rtm serve --postgres URL` wires it in.
public protocol ChannelBackplane: Sendable {
    /// This node's name, unique in the cluster (`rtm serve --node-id`).
    var node: String { get }
    /// Starts the backplane; from its return on, every message committed by any node is handed
    /// to `events` once, in each channel's sequence order, with the gaps, the database link's
    /// changes and the other nodes' lives (one call at a time).
    func start(events: @escaping @Sendable (BackplaneEvent) async -> Void) async throws
    /// Stores messages (all committed together) and returns each one's place, in order. Throws
    /// when nothing was stored.
    func publish(_ messages: [BackplanePublish]) async throws -> [BackplaneReceipt]
    /// The longest a client's publish waits for its answer, from its arrival at the node (its
    /// turn behind earlier calls included): past it, it is refused (`BackplaneConnectionPublisher`).
    var publishDeadline: TimeAmount { get }
    /// The messages of control channel `channel` (app id "", a name starting with '/')
    /// committed at or after `sinceMillis`, in the log's order: what a node that starts reads
    /// back to rebuild the state the cluster keeps only in its log (call invitations). Called
    /// after `start`; messages numbered after where following started also arrive through
    /// `events`.
    func controlHistory(channel: String, sinceMillis: Int64) async throws -> [BackplaneMessage]
    /// Starts delivering `channels`' messages to this node (through `events`, as every
    /// message of the cluster's own channels is). Returns once the backplane has reported where
    /// each stands (`BackplaneEvent.following`, handled before any of its messages): a
    /// subscribe waiting for it answers with the cluster's position and misses nothing after it.
    /// Throws when that position cannot be read (the channels are not followed then).
    ///
    /// A node follows only the channels it has subscribers or replay buffers for, so that what
    /// each publish costs the database and the nodes grows with the nodes interested in its
    /// channel, not with every node of the cluster.
    func follow(_ channels: [BackplaneFollow]) async throws
    /// Stops delivering these channels' messages to this node (each with the generation of the
    /// follow it ends: a stop meant for an earlier follow of a channel followed again since
    /// does nothing).
    func unfollow(_ channels: [BackplaneFollow])
    /// Where this node answers `/health` ("host:port"), once it listens: the other nodes ask it
    /// there whether it reaches the database when they cannot (`BackplaneEvent.leaseLapsed`).
    func advertise(address: String)
    /// Whether this node reaches the database now: a renewal of its lease, bounded by `timeout`
    /// (and the call timeout), that got an answer (renewed, or found that the others declared
    /// this node dead, which the backplane then reports as `BackplaneEvent.fenced`). Asked by a
    /// node whose lease lapsed once another node said it reaches the database (`PartitionWatch`).
    func reachesDatabase(within timeout: TimeAmount) async -> Bool
    /// Stops following and closes the backplane's connections.
    func stop() async
}

extension ChannelBackplane {
    /// 5 s, the PostgreSQL backplane's default call timeout.
    public var publishDeadline: TimeAmount { .seconds(5) }
}

/// A message to publish through a `ChannelBackplane`.
public struct BackplanePublish: Sendable {
    public var appId: String
    public var channel: String
    public var publisher: String
    /// The publisher's client message id (M-3), if any.
    public var msgId: UInt64?
    public var customType: String?
    public var isText: Bool
    public var payload: ByteBuffer
    /// Publish time, milliseconds since 1970.
    public var millis: Int64

    public init(appId: String, channel: String, publisher: String, msgId: UInt64?, customType: String?, isText: Bool,
                payload: ByteBuffer, millis: Int64) {
        self.appId = appId
        self.channel = channel
        self.publisher = publisher
        self.msgId = msgId
        self.customType = customType
        self.isText = isText
        self.payload = payload
        self.millis = millis
    }
}

/// Where a published message landed: its channel's sequence number and epoch, the same on
/// every node (M-2).
public struct BackplaneReceipt: Sendable, Equatable {
    public var seq: UInt64
    public var epoch: String
    /// The backplane recognised a resend (SPEC M-3): committed before, by any node, and not
    /// stored again; `seq` and `epoch` are the first copy's.
    public var resent: Bool

    public init(seq: UInt64, epoch: String, resent: Bool = false) {
        self.seq = seq
        self.epoch = epoch
        self.resent = resent
    }
}

/// A committed channel message, as every node delivers it to its own subscribers.
public struct BackplaneMessage: Sendable {
    public var appId: String
    public var channel: String
    public var seq: UInt64
    public var epoch: String
    public var publisher: String
    public var customType: String?
    public var isText: Bool
    public var payload: ByteBuffer
    /// Publish time, milliseconds since 1970.
    public var millis: Int64
    /// The node that published it, when the backplane knows (stream channels' members are
    /// tracked per node, so that a dead node's members leave).
    public var node: String?
    /// The publishing client's message id, when it gave one (resends are dropped, M-3).
    public var msgId: UInt64?

    public init(appId: String, channel: String, seq: UInt64, epoch: String, publisher: String, customType: String?,
                isText: Bool, payload: ByteBuffer, millis: Int64, node: String? = nil, msgId: UInt64? = nil) {
        self.node = node
        self.msgId = msgId
        self.appId = appId
        self.channel = channel
        self.seq = seq
        self.epoch = epoch
        self.publisher = publisher
        self.customType = customType
        self.isText = isText
        self.payload = payload
        self.millis = millis
    }
}

/// A channel a node starts (or stops) following through its `ChannelBackplane`.
public struct BackplaneFollow: Sendable, Equatable {
    public var appId: String
    public var channel: String
    /// Names this follow (a stop names the follow it ends).
    public var generation: UInt64
    /// Where the node's subscribers stand, when it has some: the messages after it (at most
    /// `replayMax` of the newest) come with the start (`BackplaneFollowStart.recent`), so that
    /// a subscriber resuming on a node that did not follow the channel is replayed what it
    /// missed.
    public var after: ChannelPosition?
    public var replayMax: Int

    public init(appId: String, channel: String, generation: UInt64, after: ChannelPosition? = nil, replayMax: Int = 0) {
        self.appId = appId
        self.channel = channel
        self.generation = generation
        self.after = after
        self.replayMax = replayMax
    }
}

/// Where a channel followed from now on stands (`BackplaneEvent.following`): every message
/// numbered after `seq` in `epoch` is delivered as it comes.
public struct BackplaneFollowStart: Sendable {
    public var appId: String
    public var channel: String
    public var epoch: String
    public var seq: UInt64
    /// The messages after the follow's `after`, up to `seq`, oldest first.
    public var recent: [BackplaneMessage]

    public init(appId: String, channel: String, epoch: String, seq: UInt64, recent: [BackplaneMessage] = []) {
        self.appId = appId
        self.channel = channel
        self.epoch = epoch
        self.seq = seq
        self.recent = recent
    }
}
