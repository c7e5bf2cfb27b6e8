import NIOCore
import RTMServer

/// One channel message as it crosses the database: what a node publishes, and what every node
/// reads back to deliver to its own subscribers.
public struct ChannelLogEntry: Sendable, Equatable {
    public var appId: String
    public var channel: String
    /// The channel's sequence number, the same on every node (dense: 1, 2, 3, …).
    public var seq: Int64
    /// The channel's epoch (M-2): created with the channel's first message, and again with its
    /// first message on a new timeline of the database (after a failover).
    public var epoch: String
    public var publisher: String
    /// The node the publisher was connected to.
    public var node: String
    /// The publisher's client message id (M-3), if it sent one.
    public var msgId: UInt64?
    public var customType: String?
    public var isText: Bool
    public var payload: ByteBuffer
    /// Wall-clock publish time, milliseconds since 1970.
    public var millis: Int64
    /// The database timeline it was committed on (`rtm_timeline()`: eight hex digits, greater
    /// after each failover); nil for rows older than the column.
    public var timeline: String?

    public init(appId: String, channel: String, seq: Int64, epoch: String, publisher: String, node: String,
                msgId: UInt64?, customType: String?, isText: Bool, payload: ByteBuffer, millis: Int64, timeline: String? = nil) {
        self.appId = appId
        self.channel = channel
        self.seq = seq
        self.epoch = epoch
        self.publisher = publisher
        self.node = node
        self.msgId = msgId
        self.customType = customType
        self.isText = isText
        self.payload = payload
        self.millis = millis
        self.timeline = timeline
    }
}

/// A message to append (its sequence number and epoch are the database's to give): the
/// server's `BackplanePublish`, so the backplane hands publishes to the log as they are.
public typealias ChannelLogAppend = BackplanePublish

/// Where a committed append landed.
public struct ChannelLogReceipt: Sendable, Equatable {
    public let seq: Int64
    public let epoch: String
    /// A resend (SPEC M-3): the message was committed before (by any node) and was not stored
    /// again; `seq` and `epoch` are the first copy's.
    public let resent: Bool

    public init(seq: Int64, epoch: String, resent: Bool = false) {
        self.seq = seq
        self.epoch = epoch
        self.resent = resent
    }
}

/// A position in the log: the writing transaction's id, then the row's position. Readers move
/// forward in this order and never read at or above the oldest running transaction, so every
/// row is read once, however late its transaction commits.
public struct ChannelLogCursor: Sendable, Equatable, Comparable, CustomStringConvertible {
    public var xid: UInt64
    public var pos: Int64

    public init(xid: UInt64, pos: Int64) {
        self.xid = xid
        self.pos = pos
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.xid, lhs.pos) < (rhs.xid, rhs.pos) }

    public var description: String { "\(xid)/\(pos)" }
}

/// A channel key in the log.
public struct ChannelLogKey: Hashable, Sendable, CustomStringConvertible {
    public let appId: String
    public let channel: String

    public init(appId: String, channel: String) {
        self.appId = appId
        self.channel = channel
    }

    public var description: String { "\(appId)/\(channel)" }
}
