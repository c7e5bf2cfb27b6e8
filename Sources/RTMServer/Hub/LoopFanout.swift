import NIOCore
import NIOWebSocket

/// The subscribers of each channel that live on one event loop, and the writes to them.
///
/// Confined to its event loop: every method must be called on it. A publish hops once to each
/// loop that has subscribers of the channel, then writes the same encoded buffer to each local
/// subscriber (nothing per recipient), and flushes every touched connection once per loop tick.
final class LoopFanout: @unchecked Sendable {
    let eventLoop: any EventLoop
    let index: Int
    private var subscribers: [ChannelKey: [UInt64: Subscriber]] = [:]

    struct Subscriber {
        let connection: ConnectionRef
        /// Which of the channel's events it receives (presence, storage, locks).
        let features: ChannelFeatures
        /// Where pre-encoded frames are written (below the WebSocket frame encoder).
        let raw: ChannelHandlerContext?
        /// The channel's `Delivered` totals when it joined: what it was sent since is the
        /// difference (nothing is counted per recipient on the publish path).
        var joined = Delivered()
    }

    /// Channel messages and bytes written to each local subscriber of a channel since the
    /// channel got its first one here (once per batch, for all of them).
    struct Delivered {
        var messages = 0
        var bytes = 0

        mutating func add(messages: Int, bytes: Int) {
            self.messages &+= messages
            self.bytes &+= bytes
        }
    }
    private var delivered: [ChannelKey: Delivered] = [:]
    private var needsFlush: [UInt64: ConnectionRef] = [:]
    private var flushScheduled = false
    /// Channels whose subscribers got pre-encoded writes this tick.
    private var rawFlushChannels: [ChannelKey] = []
    private let maxOutboundBytes: Int

    /// The read deadlines of this loop's connections.
    let liveness: LoopLiveness
    /// This loop's traffic counts, added to once per batch (no lock, no atomic) and folded into
    /// the metrics at each scrape (`Hub.scrape`).
    var stats = LoopStats()

    init(eventLoop: any EventLoop, index: Int, maxOutboundBytes: Int, livenessInterval: TimeAmount) {
        self.eventLoop = eventLoop
        self.index = index
        self.maxOutboundBytes = maxOutboundBytes
        self.liveness = LoopLiveness(eventLoop: eventLoop, interval: livenessInterval)
    }

    /// Adds a local subscriber. Returns true when the channel had none here before.
    func add(_ connection: ConnectionRef, to channel: ChannelKey, features: ChannelFeatures = .presence, raw: ChannelHandlerContext?) -> Bool {
        eventLoop.assertInEventLoop()
        let wasEmpty = subscribers[channel]?.isEmpty ?? true
        // Subscribing again replaces the options, not the count since the first join.
        let joined = subscribers[channel]?[connection.id]?.joined ?? delivered[channel] ?? Delivered()
        subscribers[channel, default: [:]][connection.id] = Subscriber(connection: connection, features: features, raw: raw, joined: joined)
        return wasEmpty
    }

    /// The parts of `connection`'s subscription to `channel` (nil: not subscribed here).
    func features(of connection: ConnectionRef, in channel: ChannelKey) -> ChannelFeatures? {
        eventLoop.assertInEventLoop()
        return subscribers[channel]?[connection.id]?.features
    }

    /// Removes a local subscriber. Returns true when the channel now has none here.
    func remove(_ connection: ConnectionRef, from channel: ChannelKey) -> Bool {
        eventLoop.assertInEventLoop()
        guard let removed = subscribers[channel]?.removeValue(forKey: connection.id) else { return false }
        // What the channel sent it is now the connection's own count.
        let since = sentSinceJoin(removed, channel: channel)
        connection.countOut(bytes: since.bytes, messages: since.messages)
        if subscribers[channel]?.isEmpty == true {
            subscribers[channel] = nil
            delivered[channel] = nil
            return true
        }
        return false
    }

    /// Writes `buffer` as one text frame to every local subscriber of `channel` except one
    /// (an event only to those that asked for its kind).
    func deliver(_ buffer: ByteBuffer, to channel: ChannelKey, except: UInt64?, requires: ChannelFeatures = []) {
        eventLoop.assertInEventLoop()
        guard let local = subscribers[channel] else { return }
        let frame = WebSocketFrame(fin: true, opcode: .text, data: buffer)
        var written = 0
        for (id, subscriber) in local where id != except && subscriber.features.isSuperset(of: requires) {
            write(frame, to: subscriber.connection, counted: false)
            subscriber.connection.countOut(bytes: buffer.readableBytes)
            written &+= 1
        }
        stats.deliveries &+= written
        stats.bytesOut &+= written &* buffer.readableBytes
    }

    /// Writes pre-encoded WebSocket frames (`messages` channel messages) to every local
    /// subscriber of `channel`: the same buffer for all, nothing encoded per recipient.
    func deliverRaw(_ buffer: ByteBuffer, messages: Int, to channel: ChannelKey) {
        eventLoop.assertInEventLoop()
        guard let local = subscribers[channel] else { return }
        // Counted once per batch (a subscriber cut off below as a slow consumer is counted too).
        let recipients = local.count
        stats.deliveries &+= recipients
        stats.channelMessagesOut &+= recipients &* messages
        stats.bytesOut &+= recipients &* buffer.readableBytes
        delivered[channel, default: Delivered()].add(messages: messages, bytes: buffer.readableBytes)
        let data = NIOAny(buffer)   // wrapped once for every subscriber
        for subscriber in local.values {
            guard let raw = subscriber.raw else { continue }
            guard subscriber.connection.channel.isWritable else {
                SlowConsumer.disconnect(subscriber.connection)
                continue
            }
            raw.write(data, promise: nil)
        }
        // Flushed once per loop tick, channel by channel (no per-subscriber bookkeeping).
        if rawFlushChannels.last != channel { rawFlushChannels.append(channel) }
        scheduleFlushTask()
    }

    private func sentSinceJoin(_ subscriber: Subscriber, channel: ChannelKey) -> Delivered {
        let total = delivered[channel] ?? Delivered()
        return Delivered(messages: total.messages &- subscriber.joined.messages, bytes: total.bytes &- subscriber.joined.bytes)
    }

    /// The channel messages and bytes `connection` was sent by the channels it is still
    /// subscribed to here (`channels`), not yet in its own counts.
    func sentToSubscriptions(of connection: ConnectionRef, channels: [ChannelKey]) -> Delivered {
        eventLoop.assertInEventLoop()
        var sum = Delivered()
        for channel in channels {
            guard let subscriber = subscribers[channel]?[connection.id] else { continue }
            let since = sentSinceJoin(subscriber, channel: channel)
            sum.messages &+= since.messages
            sum.bytes &+= since.bytes
        }
        return sum
    }

    /// Writes one frame to one local connection, flushed with the rest of this tick.
    func write(_ frame: WebSocketFrame, to connection: ConnectionRef, counted: Bool = true) {
        if counted { connection.countOut(bytes: frame.data.readableBytes) }
        let channel = connection.channel
        guard channel.isActive else { return }
        guard channel.isWritable else {
            // A consumer that cannot keep up is cut off instead of growing memory (SPEC §8).
            SlowConsumer.disconnect(connection)
            return
        }
        channel.write(frame, promise: nil)
        scheduleFlush(connection)
    }

    private func scheduleFlush(_ connection: ConnectionRef) {
        needsFlush[connection.id] = connection
        scheduleFlushTask()
    }

    private func scheduleFlushTask() {
        if !flushScheduled {
            flushScheduled = true
            eventLoop.execute { self.flushAll() }
        }
    }

    private func flushAll() {
        flushScheduled = false
        let channels = rawFlushChannels
        rawFlushChannels.removeAll(keepingCapacity: true)
        for channel in Set(channels) {
            for subscriber in subscribers[channel]?.values ?? [:].values { subscriber.raw?.flush() }
        }
        let pending = needsFlush
        needsFlush.removeAll(keepingCapacity: true)
        for connection in pending.values { connection.channel.flush() }
    }
}

/// Disconnecting a connection whose outbound buffer passed the high-water mark.
enum SlowConsumer {
    /// The socket is dropped without a close frame (it would only queue behind the backlog);
    /// a logged-in session keeps its grace window.
    static func disconnect(_ connection: ConnectionRef) {
        connection.channel.pipeline.fireUserInboundEventTriggered(SlowConsumerEvent())
    }
}

/// Fired through a pipeline to make its `ConnectionHandler` close as a slow consumer.
struct SlowConsumerEvent: Sendable {}
