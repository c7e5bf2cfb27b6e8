import NIOCore
import RTMProtocol

extension HubState {
    /// The result of a publish.
    enum PublishOutcome {
        /// A resend of a message already published (same client message id): not sent again.
        case duplicate(seq: UInt64)
        /// Published: deliver `buffer` on `loops`.
        case published(seq: UInt64, buffer: ByteBuffer, loops: UInt64)
    }

    /// What a returning subscriber missed in one channel (SPEC M-2).
    struct Replay {
        /// The channel's current epoch.
        var epoch: String
        /// Messages after the subscriber's position, oldest first.
        var messages: [ByteBuffer] = []
        /// Messages missed that cannot be replayed: nil = none; `.some(nil)` = an unknown number
        /// (the position is from another epoch).
        var lost: Int?? = nil
    }

    /// Publishes a channel message: deduplicates a resend (M-3), assigns the next sequence
    /// number, encodes the frame **once** (it names nothing about any recipient) and keeps it
    /// for replay. `frame.channel` must be set.
    mutating func publish(_ frame: Frame, appId: String, publisher: UserKey, clientMsgId: UInt64?, nowMillis: Int64,
                          allocator: ByteBufferAllocator) -> PublishOutcome {
        if let clientMsgId, let seq = publishDedup[publisher]?[clientMsgId] { return .duplicate(seq: seq) }
        let key = ChannelKey(appId: appId, name: frame.channel ?? "")
        var state = channels[key] ?? newChannel()
        state.seq += 1
        var frame = frame
        frame.seq = state.seq
        frame.epoch = state.epoch
        let buffer = FrameCodec.encode(frame, allocator: allocator)
        if replayMax > 0 {
            state.recent.append(RecentMessage(seq: state.seq, millis: nowMillis, buffer: buffer))
            trim(&state, nowMillis: nowMillis)
        }
        channels[key] = state
        pruneIfUnused(key)
        if let clientMsgId { publishDedup[publisher, default: RecentIDs(capacity: dedupCapacity)].remember(clientMsgId, state.seq) }
        return .published(seq: state.seq, buffer: buffer, loops: state.loops)
    }

    /// What a subscriber at `position` missed in a channel: the retained messages after it (at
    /// most the last `replayMax`, from the last `replayWindow`), and how many are lost for good.
    mutating func replay(_ key: ChannelKey, after position: ChannelPosition, nowMillis: Int64) -> Replay {
        guard var state = channels[key] else {
            // Nothing known about the channel any more: whatever came after the position is gone.
            let fresh = newChannel()
            channels[key] = fresh
            return Replay(epoch: fresh.epoch, lost: .some(nil))
        }
        trim(&state, nowMillis: nowMillis)
        channels[key] = state
        var replay = Replay(epoch: state.epoch)
        guard position.epoch == state.epoch else {
            // Another incarnation (or server): replay what we have; the loss cannot be counted.
            replay.messages = state.recent.map(\.buffer)
            replay.lost = .some(nil)
            return replay
        }
        let after = state.recent.filter { $0.seq > position.seq }
        replay.messages = after.map(\.buffer)
        let firstAvailable = after.first?.seq ?? (state.seq + 1)
        if firstAvailable > position.seq + 1 { replay.lost = .some(Int(firstAvailable - position.seq - 1)) }
        return replay
    }

    /// Drops replay entries past the window or the count limit.
    func trim(_ state: inout ChannelState, nowMillis: Int64) {
        let cutoff = nowMillis - replayWindowMillis
        while let first = state.recent.first, first.millis < cutoff || state.recent.count > replayMax {
            state.recent.removeFirst()
        }
    }

    /// Periodic clean-up: trims every channel's replay buffer and forgets unused channels.
    mutating func sweep(nowMillis: Int64) {
        for key in Array(channels.keys) {
            guard var state = channels[key] else { continue }
            trim(&state, nowMillis: nowMillis)
            channels[key] = state
            pruneIfUnused(key)
        }
    }
}
