import NIOCore
import RTMProtocol

/// A channel message as the pipeline applies it, whichever log numbered it: a connection's
/// publish numbered by the single node's in-memory log (`Hub.Outgoing`), or a message a
/// cluster's backplane committed (`BackplaneMessage`).
protocol LoggedMessage: BinaryFrame.MessageBody {
    /// The publisher's client message id (SPEC M-3), if it gave one.
    var msgId: UInt64? { get }
}

extension Hub.Outgoing: LoggedMessage {}
extension BackplaneMessage: LoggedMessage, BinaryFrame.MessageBody {}

/// The channel pipeline (SPEC M-2, M-3). A channel message goes through three steps on every
/// node, single or clustered:
///
/// 1. **Known resends** are answered with their first number and go no further
///    (`knownSequenceNumbers`, the publisher's resend memory).
/// 2. **The log** numbers the rest. On a single node that is the in-memory log, `appendToMemoryLog`
///    (the channel's next numbers in its epoch), run in the same transaction as step 3, which is
///    what keeps it as fast as a plain counter; in a cluster it is the `ChannelBackplane`, whose
///    commit comes back to every node through its follower (`applyCommitted`).
/// 3. **`applyLogged`**: the one place where a numbered message is remembered for resends, kept
///    for replay, and encoded once for this node's subscribers (only when it has some).
///
/// Replay from a position is `replay(_:after:nowMillis:)`, the same for both.
extension HubState {
    /// Step 2 on a single node: the in-memory channel log's append. Numbers `count` messages
    /// after the channel's last, in its epoch, and counts them as published. Returns the first
    /// number.
    mutating func appendToMemoryLog(_ count: Int, channel state: inout ChannelState) -> UInt64 {
        let first = state.seq + 1
        state.seq += UInt64(count)
        publishedMessages &+= UInt64(count)
        return first
    }

    /// Step 3: applies one publisher's messages, published at `millis` and numbered `seqs` (the
    /// same count, ascending, in `state.epoch`): remembers their client message ids (a copy the
    /// log stored twice, a cluster's resend through two nodes, is kept for its number and sent
    /// to nobody), keeps them for replay, and, when this node has subscribers of the channel,
    /// appends them to `out` as few `message` frames as possible. Returns how many it encoded,
    /// and whether any was a copy stored twice.
    @discardableResult
    mutating func applyLogged<Bodies: RandomAccessCollection>(
        _ bodies: Bodies, seqs: [UInt64], publisher: UserKey, millis: Int64, channel key: ChannelKey,
        state: inout ChannelState, into out: inout ByteBuffer?, nowMillis: Int64, allocator: ByteBufferAllocator
    ) -> (encoded: Int, resent: Bool) where Bodies.Element: LoggedMessage, Bodies.Index == Int {
        guard let last = seqs.last else { return (0, false) }
        // M-3: every id is remembered with its number (a resend's first), once per publisher run.
        var resent: [Bool]?
        let numbered = zip(seqs.indices, bodies.indices).lazy.compactMap { (offset: Int, index: Int) -> PublishResendMemory.NumberedID? in
            guard let id = bodies[index].msgId else { return nil }
            return PublishResendMemory.NumberedID(offset: offset, id: id, seq: seqs[offset])
        }
        let remembered = resends.remember(numbered, publisher: publisher)
        if !remembered.copies.isEmpty {
            resent = Array(repeating: false, count: seqs.count)
            for offset in remembered.copies { resent?[offset] = true }
        }
        // A publisher without a session here (the admin API, another node's user): its memory
        // goes after the resend window instead of staying for the uptime.
        if remembered.count > 0, !resends.isRetiring(publisher) { publisherMayHaveLeft(publisher, wallMillis: nowMillis) }
        state.seq = max(state.seq, last)
        if state.replayMax > 0 { keep(bodies, seqs: seqs, resent: resent, publisher: publisher.userId, millis: millis, in: &state, nowMillis: nowMillis, allocator: allocator) }
        // Encoded only for a channel with subscribers on this node.
        guard state.loops != 0 else { return (0, resent != nil) }
        let template = BinaryFrame.MessageTemplate(epoch: state.epoch, channel: key.name.utf8, publisher: publisher.userId)
        if out == nil {
            var size = 64 + key.name.utf8.count + publisher.userId.utf8.count
            for index in bodies.indices { size += bodies[index].payload.readableBytes + 8 }
            out = allocator.buffer(capacity: size)
        }
        guard let resent else {
            Self.appendFrames(bodies, seqs: seqs, ts: millis, template: template, into: &out!)
            return (seqs.count, false)
        }
        // Resends stay in the replay buffer for their numbers; they are sent to nobody.
        let sent = resent.indices.filter { !resent[$0] }
        Self.appendFrames(sent.lazy.map { bodies[bodies.startIndex + $0] }, seqs: sent.lazy.map { seqs[$0] }, ts: millis,
                          template: template, into: &out!)
        return (sent.count, true)
    }

    /// Keeps the last `replayMax` of applied messages for replay (M-2). The payloads are copied
    /// into one buffer of their own (one allocation), so that replay does not pin the read
    /// buffers they came in.
    private func keep<Bodies: RandomAccessCollection>(
        _ bodies: Bodies, seqs: [UInt64], resent: [Bool]?, publisher: String, millis: Int64, in state: inout ChannelState,
        nowMillis: Int64, allocator: ByteBufferAllocator
    ) where Bodies.Element: LoggedMessage, Bodies.Index == Int {
        let keptOffsets = max(0, seqs.count - state.replayMax)..<seqs.count
        var keptBytes = 0
        for offset in keptOffsets { keptBytes += bodies[bodies.startIndex + offset].payload.readableBytes }
        var copy = allocator.buffer(capacity: keptBytes)
        for offset in keptOffsets { copy.writeImmutableBuffer(bodies[bodies.startIndex + offset].payload) }
        var start = copy.readerIndex   // sliced after all writes: no copy on write
        for offset in keptOffsets {
            let body = bodies[bodies.startIndex + offset]
            let length = body.payload.readableBytes
            state.recent.append(RecentMessage(seq: seqs[offset], millis: millis, publisher: publisher, customType: body.customType,
                                              isText: body.isText, payload: copy.getSlice(at: start, length: length)!,
                                              resent: resent?[offset] ?? false))
            start += length
        }
        trim(&state, nowMillis: nowMillis)
    }
}
