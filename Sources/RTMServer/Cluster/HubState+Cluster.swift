import NIOCore
import RTMProtocol

extension HubState {
    /// Cluster mode: applies messages a `ChannelBackplane` committed, of one channel,
    /// in sequence order, from any node. The channel takes the backplane's epoch and numbers
    /// (the same on every node, SPEC M-2), drops a resend committed twice (M-3, `ResendFilter`),
    /// keeps the messages for replay as a local publish
    /// does (so a subscriber that resumes on this node after publishing elsewhere is replayed
    /// from here), and encodes them once for the fan-out (when it has subscribers here). Numbers at or below the channel's
    /// are dropped (delivered already). Returns the buffer to fan out (nil: nothing new), how
    /// many messages it holds, and the loops with subscribers.
    mutating func applyCommitted(_ messages: ArraySlice<BackplaneMessage>, channel key: ChannelKey,
                                 allocator: ByteBufferAllocator) -> (buffer: ByteBuffer?, count: Int, loops: UInt64) {
        var state = channels.removeValue(forKey: key) ?? newChannel(key)
        var fresh: [RecentMessage] = []
        fresh.reserveCapacity(messages.count)
        var resends = ResendFilter()
        defer {
            resends.finish(into: &publishDedup)
            // A publisher whose sessions ended before this node read its messages: its memory
            // (made just now) goes after the window too, instead of staying for the uptime. A
            // window already running is not pushed back by every batch read.
            var previous: String?
            for message in messages where message.msgId != nil && message.publisher != previous {
                previous = message.publisher
                let publisher = UserKey(appId: key.appId, userId: message.publisher)
                if !dedupRetention.isPending(publisher) { publisherMayHaveLeft(publisher, wallMillis: Hub.wallMillis) }
            }
        }
        for message in messages {
            if message.epoch != state.epoch {
                // The local placeholder epoch (or an older incarnation): the backplane's wins.
                state.epoch = message.epoch
                state.seq = 0
                state.recent.removeAll()
                fresh.removeAll()
            }
            guard message.seq > state.seq else { continue }
            state.seq = message.seq
            let resent = message.msgId.map {
                resends.isResend($0, seq: message.seq, publisher: UserKey(appId: key.appId, userId: message.publisher),
                                 dedup: &publishDedup, capacity: dedupCapacity)
            } ?? false
            fresh.append(RecentMessage(seq: message.seq, millis: message.millis, publisher: message.publisher,
                                       customType: message.customType, isText: message.isText, payload: message.payload, resent: resent))
        }
        if state.replayMax > 0, !fresh.isEmpty {
            state.recent.append(contentsOf: fresh.suffix(state.replayMax))
            trim(&state, nowMillis: Hub.wallMillis)
        }
        // Resends stay in the replay buffer for their numbers; they are sent to nobody.
        if fresh.contains(where: \.resent) { fresh.removeAll { $0.resent } }
        var buffer: ByteBuffer?
        // Encoded only for a channel with subscribers on this node: a node without any keeps
        // the messages for replay and sends them to nobody.
        if !fresh.isEmpty, state.loops != 0 {
            var size = 64
            for message in fresh { size += message.payload.readableBytes + message.publisher.utf8.count + 8 }
            var out = allocator.buffer(capacity: size + key.name.utf8.count)
            // Consecutive messages of one publisher published at the same time share frames,
            // as on the single-node path.
            var rest = fresh[...]
            while let first = rest.first {
                let group = rest.prefix { $0.publisher == first.publisher && $0.millis == first.millis }
                Self.appendFrames(group, seqs: group.lazy.map(\.seq), ts: first.millis,
                                  template: .init(epoch: state.epoch, channel: key.name.utf8, publisher: first.publisher), into: &out)
                rest = rest.dropFirst(group.count)
            }
            buffer = out
        }
        channels[key] = state
        pruneIfUnused(key)
        return (buffer, fresh.count, state.loops)
    }

    /// Cluster mode: numbers of a channel that will never arrive (M-2), or the start of its new
    /// epoch (the count unknown: the database failed over). The channel moves past them,
    /// taking the gap's epoch if it is new; its replay buffer forgets what came before the gap
    /// (a replay cannot cover across it, so a returning subscriber is told `gap` with the count
    /// of everything it then misses). Returns the loops with subscribers, or nil when the
    /// channel is past the gap already.
    mutating func applyGap(_ gap: BackplaneGap, channel key: ChannelKey) -> UInt64? {
        var state = channels.removeValue(forKey: key) ?? newChannel(key)
        defer {
            channels[key] = state
            pruneIfUnused(key)
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
        channelEpochs.apply(positions)
        invitationLogStarts(positions)
        // The same memory, filled the same way, as when the log is applied (a copy committed
        // later keeps the first number).
        var resends = ResendFilter()
        var seeded: Set<UserKey> = []
        for recent in positions.recentIds {
            let publisher = UserKey(appId: recent.appId, userId: recent.publisher)
            _ = resends.isResend(recent.msgId, seq: recent.seq, publisher: publisher, dedup: &publishDedup, capacity: dedupCapacity)
            seeded.insert(publisher)
        }
        resends.finish(into: &publishDedup)
        for publisher in seeded where !dedupRetention.isPending(publisher) { publisherMayHaveLeft(publisher, wallMillis: wallMillis) }
    }
}

/// M-3 across nodes: a client that resends a publish through another node (its first node died
/// before the ack) may have it committed twice. Every node applies the log in the same order and
/// remembers each publisher's message ids with their first number (`publishDedup`, the same
/// memory a publish on this node consults before committing), so every node drops the same
/// later copy. Consecutive messages of one publisher touch its memory once.
struct ResendFilter {
    private var current: (publisher: UserKey, ids: RecentIDs<UInt64>)?

    /// Whether `id` of `publisher` was committed before under another number; remembers it if new.
    mutating func isResend(_ id: UInt64, seq: UInt64, publisher: UserKey, dedup: inout [UserKey: RecentIDs<UInt64>],
                           capacity: Int) -> Bool {
        if current?.publisher != publisher {
            finish(into: &dedup)
            current = (publisher, dedup.removeValue(forKey: publisher) ?? RecentIDs(capacity: capacity))
        }
        if let first = current!.ids[id] { return first != seq }
        current!.ids.remember(id, seq)
        return false
    }

    /// Puts the memory in use back.
    mutating func finish(into dedup: inout [UserKey: RecentIDs<UInt64>]) {
        if let current { dedup[current.publisher] = current.ids }
        current = nil
    }
}
