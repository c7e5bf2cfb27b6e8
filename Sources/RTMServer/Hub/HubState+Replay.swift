import NIOCore
import RTMProtocol

extension HubState {
    /// What a returning subscriber missed in one channel (SPEC M-2).
    struct Replay {
        /// The channel's current epoch.
        var epoch: String
        /// Messages after the subscriber's position, oldest first, as complete WebSocket frames.
        var messages: [ByteBuffer] = []
        /// Messages missed that cannot be replayed: nil = none; `.some(nil)` = an unknown number
        /// (the position is from another epoch).
        var lost: Int?? = nil
    }

    /// A single node's publish of one publisher's messages to one channel, through the channel
    /// pipeline (`HubState+Pipeline`): resends known to the publisher's memory get their first
    /// number (M-3), the in-memory log numbers the rest, and `applyLogged` remembers, keeps and
    /// encodes them **once**, as few complete WebSocket frames as possible (nothing in them
    /// names a recipient). Returns the sequence numbers (a resend gets its first one), the
    /// channel epoch they were numbered in, the buffer to fan out (nil: nothing new, or no
    /// subscriber here), and the loops with subscribers.
    mutating func publish(_ messages: [Hub.Outgoing], channel key: ChannelKey, publisher: UserKey, nowMillis: Int64,
                          dropSeq: UInt64?, allocator: ByteBufferAllocator) -> (seqs: [UInt64], epoch: String, buffer: ByteBuffer?, loops: UInt64) {
        // Taken out of the table while it changes, so that appending to the replay buffer
        // mutates the only copy instead of copying it on write.
        var state = channels.take(key)
        var buffer: ByteBuffer?
        let known = knownSequenceNumbers(of: messages, publisher: publisher)
        var seqs: [UInt64]
        if known == nil, dropSeq == nil {
            // Every message is new (the usual case): read in place through a buffer pointer; a
            // lazy map (or an array's subscript) copies each message, its payload and custom
            // type retained and released, every time it is read: half the publish path's time
            // at one subscriber went into that reference counting.
            let first = appendToMemoryLog(messages.count, channel: &state)
            seqs = Array(first..<(first + UInt64(messages.count)))
            let applied = messages.withUnsafeBufferPointer { messages in
                applyLogged(messages, seqs: seqs, publisher: publisher, millis: nowMillis, channel: key, state: &state,
                            into: &buffer, nowMillis: nowMillis, allocator: allocator)
            }
            // The same msgId twice in one read (M-3): the second copy is acknowledged with the
            // first's number (it was kept for its own, sent to nobody).
            if applied.resent { seqs = firstNumbers(of: messages, seqs: seqs, publisher: publisher) }
        } else {
            var numbered: [UInt64] = []
            numbered.reserveCapacity(messages.count)
            var fresh: [Int] = []
            for index in messages.indices {
                if let seq = known?[index] {
                    numbered.append(seq)
                } else {
                    numbered.append(appendToMemoryLog(1, channel: &state))
                    // Test flag: a deliberately lost message (numbered, never delivered or kept).
                    if numbered[index] != dropSeq { fresh.append(index) }
                }
            }
            if !fresh.isEmpty, applyLogged(fresh.lazy.map { messages[$0] }, seqs: fresh.map { numbered[$0] }, publisher: publisher,
                                           millis: nowMillis, channel: key, state: &state, into: &buffer, nowMillis: nowMillis,
                                           allocator: allocator).resent {
                numbered = firstNumbers(of: messages, seqs: numbered, publisher: publisher)
            }
            seqs = numbered
        }
        channels.put(state, for: key)
        channels.pruneIfUnused(key)
        return (seqs, state.epoch, buffer, state.loops)
    }

    /// The numbers to acknowledge: each message's first (a copy of an id seen earlier in the
    /// same read gets the earlier one's).
    private mutating func firstNumbers(of messages: [Hub.Outgoing], seqs: [UInt64], publisher: UserKey) -> [UInt64] {
        guard let known = resends.knownNumbers(of: messages, publisher: publisher) else { return seqs }
        return zip(known, seqs).map { $0 ?? $1 }
    }

    /// A frame's body stays within the clients' frame limit (64 KB) unless one message alone
    /// is larger (it cannot be: a payload is at most 32 KB).
    static let maxFrameBody = Limits().maxFrameBytes

    /// Appends messages of one publisher, published at `ts`, in ascending sequence order, as
    /// `message` frames: consecutive numbers share a frame until it would pass the clients'
    /// frame limit; a gap in the numbers (a test drop) starts a new frame. Used for the live
    /// fan-out and for replays alike. `seqs` are the bodies' numbers, in the same order.
    static func appendFrames<Body: BinaryFrame.MessageBody, Bodies: RandomAccessCollection<Body>>(
        _ bodies: Bodies, seqs: some Sequence<UInt64>, ts: Int64, template: BinaryFrame.MessageTemplate, into buffer: inout ByteBuffer
    ) where Bodies.Index == Int {
        let maxItemBytes = maxFrameBody - template.maxHeaderBytes
        var runStart = bodies.startIndex
        var runSeq: UInt64 = 0   // the current frame's first number
        var runBytes = 0
        for (index, seq) in zip(bodies.indices, seqs) {
            let itemBytes = BinaryFrame.itemSize(bodies[index])
            if index == runStart {
                runSeq = seq
            } else if seq != runSeq + UInt64(index - runStart) || runBytes + itemBytes > maxItemBytes {
                BinaryFrame.writeMessagesFrame(into: &buffer, seq: runSeq, ts: ts, template: template, messages: bodies[runStart..<index])
                (runStart, runSeq, runBytes) = (index, seq, 0)
            }
            runBytes += itemBytes
        }
        if runStart < bodies.endIndex {
            BinaryFrame.writeMessagesFrame(into: &buffer, seq: runSeq, ts: ts, template: template, messages: bodies[runStart...])
        }
    }

    /// What a subscriber at `position` missed in a channel: the retained messages after it (at
    /// most the last `replayMax`, from the last `replayWindow`: the server's, or the channel's
    /// namespace's), and how many are lost for good.
    mutating func replay(_ key: ChannelKey, after position: ChannelPosition, nowMillis: Int64) -> Replay {
        // A channel this node holds nothing of starts with nothing to replay: on a single node
        // in a new epoch (what came after the position is gone, how much unknown); in a cluster
        // at the channel's cluster position (what came after the position is counted lost).
        var state = channels.take(key)
        trim(&state, nowMillis: nowMillis)
        channels.put(state, for: key)
        var replay = Replay(epoch: state.epoch)
        guard position.epoch == state.epoch else {
            // Another incarnation (or server): replay what we have; the loss cannot be counted.
            replay.messages = frames(state.recent.filter { !$0.resent }[...], channel: key, epoch: state.epoch)
            replay.lost = .some(nil)
            return replay
        }
        let after = state.recent.filter { $0.seq > position.seq }
        replay.messages = frames(after.filter { !$0.resent }[...], channel: key, epoch: state.epoch)
        let firstAvailable = after.first?.seq ?? (state.seq + 1)
        if firstAvailable > position.seq + 1 { replay.lost = .some(Int(firstAvailable - position.seq - 1)) }
        return replay
    }

    /// Encodes kept messages for a replay: the messages of one publisher published at the same
    /// time go through `appendFrames`, as when they were first sent.
    func frames<Recent: RandomAccessCollection<RecentMessage>>(_ recent: Recent, channel key: ChannelKey, epoch: String) -> [ByteBuffer]
        where Recent.Index == Int {
        var frames: [ByteBuffer] = []
        var rest = recent[...]
        while let first = rest.first {
            let group = rest.prefix { $0.publisher == first.publisher && $0.millis == first.millis }
            var buffer = ByteBuffer()
            Self.appendFrames(group, seqs: group.lazy.map(\.seq), ts: first.millis,
                              template: .init(epoch: epoch, channel: key.name.utf8, publisher: first.publisher), into: &buffer)
            frames.append(buffer)
            rest = rest.dropFirst(group.count)
        }
        return frames
    }

    /// Drops replay entries past the window or the count limit.
    func trim(_ state: inout ChannelState, nowMillis: Int64) {
        let cutoff = nowMillis - state.replayWindowMillis
        while let first = state.recent.first, first.millis < cutoff || state.recent.count > state.replayMax {
            state.recent.removeFirst()
        }
    }

    /// Periodic clean-up: trims every channel's replay buffer and forgets unused channels.
    mutating func sweep(nowMillis: Int64) {
        for key in Array(channels.keys) {
            guard var state = channels[key] else { continue }
            trim(&state, nowMillis: nowMillis)
            channels.put(state, for: key)
            channels.pruneIfUnused(key)
        }
    }
}
