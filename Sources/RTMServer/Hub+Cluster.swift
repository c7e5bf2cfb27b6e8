import NIOCore
import RTMProtocol

/// Cluster mode (issue 13): channel publishes go through the configured `ChannelBackplane`;
/// every node delivers what the backplane hands back. Without a backplane none of this runs.
extension Hub {
    /// Publishes messages of one publisher to one channel through `backplane` and returns their
    /// sequence numbers once committed (the publisher's ack), and the channel's epoch (nil when
    /// every message was a resend). Nothing is fanned out here: the
    /// messages come back through `applyCommitted`, on this node as on every other.
    ///
    /// Resends (M-3) are recognised per publisher on this node, as on a single node: a resend of
    /// a committed client message id gets its first number and is not stored again. Limit: a
    /// resend through another node, or while the first attempt is still being committed, is
    /// stored (and delivered) twice.
    func publishThroughBackplane(_ backplane: any ChannelBackplane, appId: String, channel: String, publisher: UserKey,
                                 messages: [Outgoing]) async throws -> (seqs: [UInt64], epoch: String?) {
        var seqs: [UInt64?] = state.withLockedValue { state in
            guard var dedup = state.publishDedup.removeValue(forKey: publisher) else { return messages.map { _ in nil } }
            defer { state.publishDedup[publisher] = dedup }
            return messages.map { message in message.msgId.flatMap { dedup[$0] } }
        }
        let fresh = messages.indices.filter { seqs[$0] == nil }
        guard !fresh.isEmpty else { return (seqs.map { $0 ?? 0 }, nil) }
        let now = Self.wallMillis
        let receipts = try await backplane.publish(fresh.map { index in
            let message = messages[index]
            return BackplanePublish(appId: appId, channel: channel, publisher: publisher.userId, msgId: message.msgId,
                                    customType: message.customType, isText: message.isText, payload: message.payload, millis: now)
        })
        for (index, receipt) in zip(fresh, receipts) { seqs[index] = receipt.seq }
        state.withLockedValue { state in
            var dedup = state.publishDedup.removeValue(forKey: publisher)
            for index in fresh {
                guard let id = messages[index].msgId, let seq = seqs[index] else { continue }
                if dedup == nil { dedup = RecentIDs(capacity: state.dedupCapacity) }
                dedup?.remember(id, seq)
            }
            if let dedup { state.publishDedup[publisher] = dedup }
            state.publishedMessages &+= UInt64(fresh.count)
        }
        return (seqs.map { $0 ?? 0 }, receipts.first?.epoch)
    }

    /// Messages the backplane committed (any node's), in order per channel: each channel's run
    /// is applied to the local state (numbers, epoch, replay buffer) and fanned out to local
    /// subscribers with the same encoding and hops as a local publish.
    func applyCommitted(_ messages: [BackplaneMessage]) {
        let allocator = ByteBufferAllocator()
        var start = messages.startIndex
        while start < messages.endIndex {
            let first = messages[start]
            var end = start + 1
            while end < messages.endIndex, messages[end].channel == first.channel, messages[end].appId == first.appId { end += 1 }
            let key = ChannelKey(appId: first.appId, name: first.channel)
            state.withLockedValue { state in
                let (buffer, count, loops) = state.applyCommitted(messages[start..<end], channel: key, allocator: allocator)
                // Queued while the state is held, as in `publish`: every loop gets a channel's
                // messages in sequence order.
                if let buffer { enqueueRaw(buffer, messages: count, to: key, loops: loops) }
            }
            start = end
        }
    }

    /// Starts the backplane (cluster mode), delivering what it commits to this node's subscribers.
    func startBackplane() async throws {
        guard let backplane = configuration.backplane else { return }
        try await backplane.start { [self] messages in applyCommitted(messages) }
    }
}
