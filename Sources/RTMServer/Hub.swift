import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import RTMProtocol

/// The one owner of global server state (`HubState`) behind one lock, and the effects of its
/// decisions: presence broadcasts, kicks, grace timers, fan-out of channel messages.
final class Hub: Sendable {
    private let state: NIOLockedValueBox<HubState>
    let fanouts: [LoopFanout]
    private let fanoutByLoop: [ObjectIdentifier: LoopFanout]
    private let connections = NIOLockedValueBox<[UInt64: ConnectionRef]>([:])
    private let nextConnectionID = NIOLockedValueBox<UInt64>(1)
    let configuration: ServerConfiguration
    let logger: Logger
    /// User messages: durable, acknowledged, re-delivered (SPEC M-1).
    let mailbox: UserMailbox
    /// This server run's epoch (channel epochs derive from it).
    let epoch: String

    init(configuration: ServerConfiguration, loops: [any EventLoop], store: any UserMessageStore, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.mailbox = UserMailbox(store: store, cap: configuration.userMessageCap, maxAge: configuration.userMessageMaxAge,
                                   dedupCapacity: configuration.dedupCapacity, logger: logger)
        let hubState = HubState(configuration: configuration)
        self.epoch = hubState.serverEpoch
        self.state = NIOLockedValueBox(hubState)
        var fanouts: [LoopFanout] = []
        var byLoop: [ObjectIdentifier: LoopFanout] = [:]
        for (index, loop) in loops.enumerated() {
            let fanout = LoopFanout(eventLoop: loop, index: index, maxOutboundBytes: configuration.maxOutboundBytes)
            fanouts.append(fanout)
            byLoop[ObjectIdentifier(loop)] = fanout
        }
        self.fanouts = fanouts
        self.fanoutByLoop = byLoop
    }

    static var wallMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    // MARK: connections

    /// Registers a new connection on its event loop.
    func register(_ channel: any Channel) -> (ConnectionRef, LoopFanout) {
        let fanout = fanoutByLoop[ObjectIdentifier(channel.eventLoop)]!
        let id = nextConnectionID.withLockedValue { value in defer { value += 1 }; return value }
        let connection = ConnectionRef(id: id, channel: channel, loopIndex: fanout.index)
        connections.withLockedValue { $0[id] = connection }
        return (connection, fanout)
    }

    func unregister(_ connection: ConnectionRef) {
        connections.withLockedValue { _ = $0.removeValue(forKey: connection.id) }
    }

    /// Every open connection (for shutdown and metrics).
    var openConnections: [ConnectionRef] { connections.withLockedValue { Array($0.values) } }

    /// Logged-in sessions, online or within their grace window.
    var sessionCount: Int { state.withLockedValue { $0.sessions.count } }

    /// Members of a channel (for tests and tools).
    func members(appId: String, channel: String) -> [String] {
        state.withLockedValue { $0.channels[ChannelKey(appId: appId, name: channel)]?.members.keys.sorted() ?? [] }
    }

    // MARK: presence

    /// setState / removeState; members are told (or the change waits for the interval event).
    func changeState(_ connection: ConnectionRef, channel: String, set: [String: String], remove: [String]) -> HubState.StateDecision {
        let decision = state.withLockedValue {
            $0.changeState(connection, channel: channel, set: set, remove: remove, limits: configuration.limits, wallMillis: Self.wallMillis)
        }
        if case .changed(_, let broadcast?) = decision { perform([broadcast]) }
        return decision
    }

    func state(of userId: String, appId: String, channel: String) -> [String: String]? {
        state.withLockedValue { $0.state(of: userId, appId: appId, channel: channel) }
    }

    func whoNow(appId: String, channel: String, after: String?) -> (snapshot: HubState.Snapshot, next: String?, total: Int) {
        state.withLockedValue { $0.whoNow(appId: appId, channel: channel, after: after, pageSize: 100) }
    }

    func whereNow(_ user: UserKey) -> [String]? {
        state.withLockedValue { $0.whereNow(user) }
    }

    // MARK: sessions

    func login(key: UserKey, connection: ConnectionRef, resumeToken: String?, heartbeat: TimeAmount, presenceTimeout: TimeAmount) -> HubState.LoginDecision {
        let now = NIODeadline.now()
        let decision = state.withLockedValue {
            $0.login(key: key, connection: connection, resumeToken: resumeToken, heartbeat: heartbeat,
                     presenceTimeout: presenceTimeout, now: now, wallMillis: Self.wallMillis)
        }
        if case .admitted(let admission) = decision {
            if let kicked = admission.kicked {
                logger.info("kicking older session", metadata: ["user": "\(key.userId)"])
                Self.close(kicked, with: Frame(type: .kicked, code: LinkStateChangeReason.sameUidLogin.rawValue,
                                               reason: "the same user id logged in from another client"))
            }
            if let replaced = admission.replaced, replaced != connection {
                replaced.channel.close(mode: .all, promise: nil)
            }
            perform(admission.broadcasts)
        }
        return decision
    }

    /// A logged-in connection closed without logout: grace window, then timeout (P-1, P-2).
    func connectionLost(_ connection: ConnectionRef, lastSeen: NIODeadline) {
        let now = NIODeadline.now()
        guard let timer = state.withLockedValue({ $0.connectionLost(connection, lastSeen: now > lastSeen ? lastSeen : now, now: now) }) else { return }
        let loop = fanouts[connection.loopIndex].eventLoop
        loop.scheduleTask(deadline: timer.deadline) { [self] in
            let broadcasts = state.withLockedValue { $0.graceExpired(timer, wallMillis: Self.wallMillis) }
            if !broadcasts.isEmpty {
                logger.info("presence timeout", metadata: ["user": "\(timer.key.userId)"])
            }
            perform(broadcasts)
        }
    }

    func logout(_ connection: ConnectionRef) {
        perform(state.withLockedValue { $0.logout(connection, wallMillis: Self.wallMillis) })
    }

    func userKey(of connection: ConnectionRef) -> UserKey? {
        state.withLockedValue { $0.userKey(of: connection) }
    }

    func connection(of key: UserKey) -> ConnectionRef? {
        state.withLockedValue { $0.connection(of: key) }
    }

    // MARK: channels

    func subscribe(_ connection: ConnectionRef, channel: String, quiet: Bool, withPresence: Bool) -> HubState.SubscribeDecision {
        let decision = state.withLockedValue {
            $0.subscribe(connection, channel: channel, quiet: quiet, withPresence: withPresence, wallMillis: Self.wallMillis)
        }
        if case .subscribed(_, let join?) = decision { perform([join]) }
        return decision
    }

    func unsubscribe(_ connection: ConnectionRef, channel: String) -> Bool {
        guard let outcome = state.withLockedValue({ $0.unsubscribe(connection, channel: channel, wallMillis: Self.wallMillis) }) else { return false }
        if let leave = outcome { perform([leave]) }
        return true
    }

    /// A loop's local subscriber set of a channel changed between empty and non-empty.
    func setLoop(_ index: Int, hasSubscribers: Bool, channel: ChannelKey) {
        state.withLockedValue { $0.setLoop(index, hasSubscribers: hasSubscribers, channel: channel) }
    }

    /// One message to publish.
    struct Outgoing {
        /// The request to acknowledge.
        let requestID: UInt64
        /// Client message id (M-3).
        let msgId: UInt64?
        let customType: String?
        let isText: Bool
        let payload: ByteBuffer
    }

    /// Publishes messages of one publisher to one channel: one lock, one encoded buffer, one hop
    /// per event loop with subscribers. Resends of published client message ids get their first
    /// sequence number and are not delivered again (M-3). Returns the sequence numbers.
    func publish(appId: String, channel: String, publisher: UserKey, messages: [Outgoing], allocator: ByteBufferAllocator) -> [UInt64] {
        let key = ChannelKey(appId: appId, name: channel)
        let dropSeq = configuration.testDropSeq
        return state.withLockedValue { state in
            let (seqs, buffer, loops) = state.publish(messages, channel: key, publisher: publisher, nowMillis: Self.wallMillis,
                                                       dropSeq: dropSeq, allocator: allocator)
            // Queued to each loop while the sequence numbers are still held: every loop receives
            // a channel's messages in sequence order, whoever published them.
            if let buffer { enqueueRaw(buffer, to: key, loops: loops) }
            return seqs
        }
    }

    private func enqueueRaw(_ buffer: ByteBuffer, to channel: ChannelKey, loops: UInt64) {
        hop(to: loops) { fanout in fanout.deliverRaw(buffer, to: channel) }
    }

    /// What a returning subscriber missed in a channel (M-2). Call after the connection has
    /// joined the channel's fan-out, so that anything newer arrives live.
    func replay(appId: String, channel: String, after position: ChannelPosition) -> HubState.Replay {
        state.withLockedValue { $0.replay(ChannelKey(appId: appId, name: channel), after: position, nowMillis: Self.wallMillis) }
    }

    /// Where a channel is now: its epoch and last sequence number (creating the channel).
    func channelPosition(appId: String, channel: String) -> ChannelPosition {
        state.withLockedValue { state in
            let key = ChannelKey(appId: appId, name: channel)
            let current = state.channels[key] ?? state.newChannel()
            state.channels[key] = current
            return ChannelPosition(epoch: current.epoch, seq: current.seq)
        }
    }

    /// Interval-mode presence events, every `presenceInterval`.
    func startPresenceIntervals() {
        guard let loop = fanouts.last?.eventLoop else { return }
        let interval = max(configuration.presenceInterval, .milliseconds(10))
        loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [self] _ in
            perform(state.withLockedValue { $0.takeIntervalEvents(wallMillis: Self.wallMillis) })
        }
    }

    /// Trims replay buffers and forgets unused channels, every replay window.
    func startSweeping() {
        guard let loop = fanouts.first?.eventLoop else { return }
        let interval = max(configuration.channelReplayWindow, .milliseconds(100))
        loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [self] _ in
            state.withLockedValue { $0.sweep(nowMillis: Self.wallMillis) }
        }
    }

    // MARK: effects

    private func perform(_ broadcasts: [HubState.Broadcast]) {
        for broadcast in broadcasts {
            let buffer = FrameCodec.encode(broadcast.frame)
            enqueue(buffer, to: broadcast.channel, loops: broadcast.loops, except: broadcast.except?.id, presence: true)
        }
    }

    /// One hop to each loop that has subscribers (never a synchronous write: the caller may hold
    /// the state lock, and the order of these hops is the order of delivery).
    private func enqueue(_ buffer: ByteBuffer, to channel: ChannelKey, loops: UInt64, except: UInt64?, presence: Bool = false) {
        hop(to: loops) { fanout in fanout.deliver(buffer, to: channel, except: except, presence: presence) }
    }

    /// Runs `body` once on each event loop whose bit is set in `loops`, in loop order.
    private func hop(to loops: UInt64, _ body: @escaping @Sendable (LoopFanout) -> Void) {
        var remaining = loops
        while remaining != 0 {
            let index = remaining.trailingZeroBitCount
            remaining &= remaining - 1
            guard index < fanouts.count else { continue }
            let fanout = fanouts[index]
            fanout.eventLoop.execute { body(fanout) }
        }
    }

    /// Sends a last frame then closes the connection (kick, shutdown).
    static func close(_ connection: ConnectionRef, with frame: Frame) {
        let channel = connection.channel
        let data = FrameCodec.encode(frame, allocator: channel.allocator)
        channel.eventLoop.execute {
            channel.pipeline.fireUserInboundEventTriggered(CloseWithFrameEvent(frame: WebSocketFrame(fin: true, opcode: .text, data: data)))
        }
    }
}

/// Asks a connection's handler to write a last frame and close.
struct CloseWithFrameEvent: @unchecked Sendable {
    let frame: WebSocketFrame
}
