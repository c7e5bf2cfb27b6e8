import RTMProtocol

/// The channels this node holds state for: members, numbering, replay buffers and the event
/// loops with subscribers (`HubState.ChannelState`). A sub-value of `HubState`: its fields
/// change only through its own functions, which keep a channel's life in one place. A channel
/// starts where `ChannelEpochs` says (a new incarnation on a single node, the cluster's
/// position in a cluster) with its namespace's replay limits, and is forgotten, its position
/// remembered, once nobody is in it, listens to it, or could still get a replay from it.
struct ChannelTable {
    /// The channels, by key.
    private(set) var states: [ChannelKey: HubState.ChannelState] = [:]
    /// Where channels this node holds nothing of start (their epoch and number).
    private(set) var epochs: ChannelEpochs
    /// The namespaces (their replay limits apply to the channels created from now on).
    private(set) var namespaces: [ChannelNamespace]
    /// The server's replay window and count, for channels outside a namespace that sets its own.
    let replayWindowMillis: Int64
    let replayMax: Int

    init(runEpoch: String, namespaces: [ChannelNamespace], replayWindowMillis: Int64, replayMax: Int) {
        self.epochs = ChannelEpochs(runEpoch: runEpoch)
        self.namespaces = namespaces
        self.replayWindowMillis = replayWindowMillis
        self.replayMax = replayMax
    }

    /// `key`'s state, if this node holds one.
    subscript(key: ChannelKey) -> HubState.ChannelState? { states[key] }

    /// How many channels this node holds.
    var count: Int { states.count }

    /// The channels this node holds.
    var keys: Dictionary<ChannelKey, HubState.ChannelState>.Keys { states.keys }

    /// The state of a channel this node holds nothing of (not put in the table): a new
    /// incarnation with a fresh epoch on a single node, the cluster's epoch and number in a
    /// cluster (`ChannelEpochs`).
    mutating func newChannel(_ key: ChannelKey) -> HubState.ChannelState {
        let position = epochs.start(key)
        let namespace = namespaces.isEmpty ? nil : namespaces.namespace(of: key.name)
        return HubState.ChannelState(epoch: position.epoch, seq: position.seq,
                                     replayWindowMillis: namespace?.replayWindow.map { $0.nanoseconds / 1_000_000 } ?? replayWindowMillis,
                                     replayMax: namespace?.replayMax ?? replayMax)
    }

    /// Takes `key`'s state out of the table to change it (a new channel's when it holds none),
    /// so that a change of its replay buffer mutates the only copy instead of copying it on
    /// write. Give it back with `put`.
    mutating func take(_ key: ChannelKey) -> HubState.ChannelState {
        states.removeValue(forKey: key) ?? newChannel(key)
    }

    /// `state` is `key`'s from now on.
    mutating func put(_ state: HubState.ChannelState, for key: ChannelKey) {
        states[key] = state
    }

    /// Forgets a channel nobody is in, listens to, or could still get a replay from.
    mutating func pruneIfUnused(_ key: ChannelKey) {
        if let state = states[key], state.members.isEmpty, state.loops == 0, state.recent.isEmpty {
            states[key] = nil
            epochs.forget(key, at: ChannelPosition(epoch: state.epoch, seq: state.seq))
        }
    }

    /// A loop's local subscriber set for a channel became non-empty (`true`) or empty.
    mutating func setLoop(_ index: Int, hasSubscribers: Bool, channel: ChannelKey) {
        var state = take(channel)
        if hasSubscribers { state.loops |= (1 << UInt64(index)) } else { state.loops &= ~(1 << UInt64(index)) }
        states[channel] = state
        if !hasSubscribers { pruneIfUnused(channel) }
    }

    /// `key`'s replay buffer is dropped (this node stopped following it), and the channel with
    /// it when nothing else holds it.
    mutating func dropReplay(_ key: ChannelKey) {
        guard states[key] != nil else { return }
        states[key]?.recent.removeAll()
        pruneIfUnused(key)
    }

    /// New namespaces (a reload): for the channels created from now on.
    mutating func reload(namespaces: [ChannelNamespace]) {
        self.namespaces = namespaces
    }

    /// The backplane's positions: where channels this node holds nothing of start (M-2).
    mutating func apply(_ positions: BackplanePositions) {
        epochs.apply(positions)
    }
}
