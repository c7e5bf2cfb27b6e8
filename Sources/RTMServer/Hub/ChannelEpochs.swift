import RTMProtocol

/// Where a channel's numbering starts when this node holds no state for it (SPEC M-2).
///
/// A single node makes a new incarnation, `<run epoch>-<n>`: a channel it forgot (nobody used
/// it for the replay window) or never had starts a new epoch at 0, and a subscriber coming back
/// with an older position is told the loss is unknown.
///
/// In a cluster the numbering is the backplane's, the same on every node. A node that answered
/// a subscribe with an epoch of its own would give the subscriber a position that no other
/// node knows: resuming through another node, it would be told of a gap that never happened.
/// So the backplane reports every channel's position when following starts, and the epoch a
/// channel's first message will get (`BackplaneEvent.positions`); the node keeps the position
/// of every channel it forgets. Kept per channel with messages (about 100 bytes each), as the
/// backplane's reader keeps each channel's number.
struct ChannelEpochs {
    /// Random per server start; single-node channel epochs derive from it.
    let runEpoch: String
    private var nextIncarnation: UInt64 = 1
    /// Cluster: the epoch a channel's first message gets (nil: a single node).
    private(set) var firstEpoch: String?
    /// Cluster: channels this node holds no state for, with their epoch and last number.
    private var forgotten: [ChannelKey: ChannelPosition] = [:]

    init(runEpoch: String) { self.runEpoch = runEpoch }

    /// The position a channel without state starts from.
    mutating func start(_ key: ChannelKey) -> ChannelPosition {
        guard let firstEpoch else {
            defer { nextIncarnation += 1 }
            return ChannelPosition(epoch: "\(runEpoch)-\(nextIncarnation)", seq: 0)
        }
        return forgotten[key] ?? ChannelPosition(epoch: firstEpoch, seq: 0)
    }

    /// The node drops its state of a channel at this position.
    mutating func forget(_ key: ChannelKey, at position: ChannelPosition) {
        guard let firstEpoch else { return }
        if position.seq == 0 && position.epoch == firstEpoch { forgotten[key] = nil } else { forgotten[key] = position }
    }

    /// The backplane's report (`BackplaneEvent.positions`).
    mutating func apply(_ positions: BackplanePositions) {
        firstEpoch = positions.firstEpoch
        for channel in positions.channels where !channel.appId.isEmpty {
            forgotten[ChannelKey(appId: channel.appId, name: channel.channel)] = ChannelPosition(epoch: channel.epoch, seq: channel.seq)
        }
    }

    /// Channels forgotten with a position (for tests and metrics).
    var forgottenCount: Int { forgotten.count }
}
