/// A data channel a node starts following (`ChannelLogFollower.follow`): from then on the
/// follower listens on its shard (`ChannelLogShards`) and reads its rows.
public struct ChannelLogFollow: Sendable, Equatable {
    public var key: ChannelLogKey
    /// Names this follow, so that a stop meant for an earlier one does not end it
    /// (`ChannelLogFollower.unfollow`).
    public var generation: UInt64
    /// Where a subscriber resuming on this node stands (its epoch and last number): the
    /// channel's messages after it, at most `replayMax` of the newest, come with the start, so
    /// that the node replays what the subscriber missed though it did not follow the channel.
    public var after: (epoch: String, seq: Int64)?
    public var replayMax: Int

    public init(key: ChannelLogKey, generation: UInt64, after: (epoch: String, seq: Int64)? = nil, replayMax: Int = 0) {
        self.key = key
        self.generation = generation
        self.after = after
        self.replayMax = replayMax
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.key == rhs.key && lhs.generation == rhs.generation && lhs.after?.epoch == rhs.after?.epoch
            && lhs.after?.seq == rhs.after?.seq && lhs.replayMax == rhs.replayMax
    }
}

/// Where a channel followed from now on stands (`ChannelLogFollower.Event.following`): every
/// message numbered after `seq` in `epoch` is delivered as it comes.
public struct ChannelLogFollowStart: Sendable, Equatable {
    public var key: ChannelLogKey
    public var epoch: String
    public var seq: Int64
    /// The messages after the follow's `after`, up to `seq`, oldest first (for replay).
    public var recent: [ChannelLogEntry]

    public init(key: ChannelLogKey, epoch: String, seq: Int64, recent: [ChannelLogEntry] = []) {
        self.key = key
        self.epoch = epoch
        self.seq = seq
        self.recent = recent
    }
}
