import RTMProtocol

/// One effect of a `StreamState` event. Events return them in order; `StreamHub.run` performs
/// them after releasing the stream channels' lock.
enum StreamAction: Sendable, Equatable {
    /// `frame`, encoded once, written to each of `to` (presence and topic events).
    case send(Frame, to: [ConnectionRef])
    /// A connection replaced by a new join of its user: it closes (close 1000, quietly).
    case closeReplaced(ConnectionRef, reason: String)
    /// A change of the channel's visible members, for the other nodes (`StreamClusterLink`;
    /// a single node has nobody to tell).
    case announce(StreamClusterEvent, channel: ChannelKey)
    /// Webhook events were queued (`StreamState.webhooks`): the dispatcher takes them.
    case wakeWebhooks
}
