import NIOCore
import RTMProtocol

extension HubState {
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

    /// Publishes messages of one publisher to one channel: deduplicates resends (M-3), assigns
    /// the next sequence numbers, encodes every new message **once** as a complete WebSocket
    /// frame into one buffer (nothing in it names a recipient) and keeps each for replay.
    /// Returns the sequence numbers (a resend gets its first one) and the buffer to fan out.
    mutating func publish(_ messages: [Hub.Outgoing], channel key: ChannelKey, publisher: UserKey, nowMillis: Int64,
                          dropSeq: UInt64?, allocator: ByteBufferAllocator) -> (seqs: [UInt64], buffer: ByteBuffer?, loops: UInt64) {
        var state = channels[key] ?? newChannel()
        var seqs: [UInt64] = []
        seqs.reserveCapacity(messages.count)
        let size = messages.reduce(0) { $0 + $1.payload.readableBytes + 48 + key.name.utf8.count + publisher.userId.utf8.count }
        var buffer = allocator.buffer(capacity: size)
        var recent: [(seq: UInt64, start: Int, end: Int)] = []
        var dedup = publishDedup[publisher]
        let template = BinaryFrame.MessageTemplate(epoch: state.epoch, channel: key.name.utf8, publisher: publisher.userId)
        for message in messages {
            if let id = message.msgId, let seq = dedup?[id] {
                seqs.append(seq)
                continue
            }
            state.seq += 1
            seqs.append(state.seq)
            if let id = message.msgId {
                if dedup == nil { dedup = RecentIDs(capacity: dedupCapacity) }
                dedup?.remember(id, state.seq)
            }
            if state.seq == dropSeq { continue }   // test flag: a deliberately lost message
            let start = buffer.writerIndex
            BinaryFrame.writeMessageFrame(into: &buffer, seq: state.seq, ts: nowMillis, template: template,
                                          customType: message.customType, isText: message.isText, payload: message.payload)
            recent.append((state.seq, start, buffer.writerIndex))
        }
        if let dedup { publishDedup[publisher] = dedup }
        if replayMax > 0 {
            for entry in recent.suffix(replayMax) {
                // A view into the shared buffer: no copy.
                let frame = buffer.getSlice(at: entry.start, length: entry.end - entry.start)!
                state.recent.append(RecentMessage(seq: entry.seq, millis: nowMillis, buffer: frame))
            }
            trim(&state, nowMillis: nowMillis)
        }
        channels[key] = state
        pruneIfUnused(key)
        return (seqs, recent.isEmpty ? nil : buffer, state.loops)
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
