import RTMProtocol
/// Traffic counts of one event loop, as plain integers: the hot path (publish fan-out, reads)
/// adds to them once per batch, with no lock or atomic; `ServerMetrics` takes and folds them
/// into the Prometheus counters when `/metrics` is scraped. Confined to its loop (it lives in
/// the loop's `LoopFanout`).
struct LoopStats: Sendable, Equatable {
    /// Channel messages accepted from publishers.
    var channelMessagesIn = 0
    /// Channel messages written to subscribers (message × recipient).
    var channelMessagesOut = 0
    /// Stream topic messages accepted from publishers.
    var streamMessagesIn = 0
    /// Stream topic messages written to recipients.
    var streamMessagesOut = 0
    /// Fan-out writes: one encoded frame (channel messages of one batch, or one channel event)
    /// to one subscriber.
    var deliveries = 0
    /// WebSocket payload bytes read from clients.
    var bytesIn = 0
    /// WebSocket frame bytes written to clients by the fan-out, replay and replies.
    var bytesOut = 0
    /// Requests refused (an error reply, or refused while the connection closed for its error
    /// budget), by operation and error code.
    var refused: [RefusalKey: Int] = [:]

    /// Returns the counts so far and starts again from zero.
    mutating func take() -> LoopStats {
        defer { self = LoopStats() }
        return self
    }

    /// Adds another loop's counts.
    mutating func add(_ other: LoopStats) {
        channelMessagesIn &+= other.channelMessagesIn
        channelMessagesOut &+= other.channelMessagesOut
        streamMessagesIn &+= other.streamMessagesIn
        streamMessagesOut &+= other.streamMessagesOut
        deliveries &+= other.deliveries
        bytesIn &+= other.bytesIn
        bytesOut &+= other.bytesOut
        refused.merge(other.refused, uniquingKeysWith: &+)
    }
}

/// What a refusal is counted by: the request's type (`unknown` when it could not be read) and
/// the error code.
struct RefusalKey: Hashable, Sendable {
    let operation: FrameType
    let code: Int

    /// A frame whose type could not be read.
    static let unknownOperation = FrameType(rawValue: "unknown")
}
