import RTMProtocol

/// Lock events (§2.12) to a channel's members. The locks themselves are the lock store's
/// (`LockService`, Hub+Locks).
extension HubState {
    /// A lock event to the channel's members that asked for lock events.
    func lockEvent(_ kind: LockEventKind, _ channel: ChannelKey, _ details: [LockDetail], _ wallMillis: Int64) -> Broadcast {
        var frame = Frame(type: .lock, channel: channel.name, event: kind.rawValue, ts: wallMillis)
        frame.locks = details
        return Broadcast(channel: channel, frame: frame, loops: channels[channel]?.loops ?? 0, except: nil, requires: .lock)
    }
}
