import NIOCore
import RTMProtocol

extension HubState {
    /// Cluster mode: messages a `ChannelBackplane` committed, of one channel, in sequence order,
    /// from any node, through step 3 of the channel pipeline (`applyLogged`, as a single node's
    /// publish). What is the follower's alone: the channel takes the backplane's epoch (the same
    /// on every node, SPEC M-2; the local placeholder or an older incarnation gives way), and
    /// numbers at or below the channel's are dropped (delivered already). Returns the buffer to
    /// fan out (nil: nothing new, or no subscriber here), how many messages it holds, and the
    /// loops with subscribers.
    mutating func applyCommitted(_ messages: ArraySlice<BackplaneMessage>, channel key: ChannelKey,
                                 allocator: ByteBufferAllocator) -> (buffer: ByteBuffer?, count: Int, loops: UInt64) {
        var state = channels.take(key)
        var buffer: ByteBuffer?
        var count = 0
        let nowMillis = Hub.wallMillis
        var rest = messages
        while let first = rest.first {
            if first.epoch != state.epoch {
                state.epoch = first.epoch
                state.seq = 0
                state.recent.removeAll()
                (buffer, count) = (nil, 0)
            }
            // One publisher's messages published at one time: one run, as a single node's read.
            let run = rest.prefix { $0.publisher == first.publisher && $0.millis == first.millis && $0.epoch == first.epoch }
            rest = rest.dropFirst(run.count)
            let new = run.drop { $0.seq <= state.seq }
            guard !new.isEmpty else { continue }
            count += applyLogged(new, seqs: new.map(\.seq), publisher: UserKey(appId: key.appId, userId: first.publisher),
                                 millis: first.millis, channel: key, state: &state, into: &buffer, nowMillis: nowMillis,
                                 allocator: allocator).encoded
        }
        channels.put(state, for: key)
        channels.pruneIfUnused(key)
        return (count == 0 ? nil : buffer, count, state.loops)
    }

    /// Cluster mode: numbers of a channel that will never arrive (M-2), or the start of its new
    /// epoch (the count unknown: the database failed over). The channel moves past them,
    /// taking the gap's epoch if it is new; its replay buffer forgets what came before the gap
    /// (a replay cannot cover across it, so a returning subscriber is told `gap` with the count
    /// of everything it then misses). Returns the loops with subscribers, or nil when the
    /// channel is past the gap already.
    mutating func applyGap(_ gap: BackplaneGap, channel key: ChannelKey) -> UInt64? {
        var state = channels.take(key)
        defer {
            channels.put(state, for: key)
            channels.pruneIfUnused(key)
        }
        if gap.epoch != state.epoch {
            state.epoch = gap.epoch
            state.seq = 0
        } else if gap.count == nil || state.seq >= gap.to {
            return nil
        }
        state.seq = max(state.seq, gap.to)
        state.recent.removeAll()
        return state.loops
    }
}

extension HubState {
    /// The backplane's positions (`BackplaneEvent.positions`): where channels this node holds
    /// nothing of start (M-2), and the message ids committed before this node followed the
    /// log, remembered as if it had read them (M-3: their resends get the first number here
    /// too; the memories of publishers without a session go after the resend window).
    mutating func applyPositions(_ positions: BackplanePositions, wallMillis: Int64) {
        channels.apply(positions)
        invitationLogStarts(positions)
        // The same memory, filled the same way, as when the log is applied (a copy committed
        // later keeps the first number).
        var seeded: Set<UserKey> = []
        for recent in positions.recentIds {
            let publisher = UserKey(appId: recent.appId, userId: recent.publisher)
            _ = resends.remember(CollectionOfOne(PublishResendMemory.NumberedID(offset: 0, id: recent.msgId, seq: recent.seq)),
                                 publisher: publisher)
            seeded.insert(publisher)
        }
        for publisher in seeded where !resends.isRetiring(publisher) { publisherMayHaveLeft(publisher, wallMillis: wallMillis) }
    }
}
