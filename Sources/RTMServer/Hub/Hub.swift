import Atomics
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import RTMProtocol

/// The one owner of global server state (`HubState`) behind one lock, and the effects of its
/// decisions: presence broadcasts, kicks, timers, fan-out of channel messages.
///
/// Every change is an event on `HubState` under the lock that returns actions (`HubAction`);
/// `run` performs them after the lock is released (Hub+Run). The one exception is the ordered
/// publish hop: a channel's messages are queued to the event loops while the lock is still held,
/// so that every loop receives them in sequence order (`publish`, `applyCommitted`); a queue
/// call is a non-blocking hop, never a write. No other lock is taken while it is held.
final class Hub: Sendable {
    let state: NIOLockedValueBox<HubState>
    let fanouts: [LoopFanout]
    /// `ConnectionHandler`s alive (a closed connection must free its own; tests check it).
    let liveHandlers = ManagedAtomic(0)
    private let fanoutByLoop: [ObjectIdentifier: LoopFanout]
    let configuration: ServerConfiguration
    /// One warning line per 10 s for connections closed for their rejected requests, and for
    /// slow consumers cut (the metrics count each; a flood would fill the log).
    let abuseLog = LogThrottle(), slowConsumerLog = LogThrottle()
    let logger: Logger
    /// User messages: durable, acknowledged, re-delivered (SPEC M-1).
    let mailbox: UserMailbox
    /// This server run's epoch (channel epochs derive from it).
    let epoch: String
    /// Metadata and history (§2.8, §2.11).
    let storage: StorageService
    /// Stream channels (§2.9).
    let streams: StreamHub
    /// Prometheus metrics (`GET /metrics`).
    let metrics: ServerMetrics
    /// Bans and revoked tokens, set through the admin API.
    let moderation = Moderation()
    /// Webhook events, when a webhook URL is configured.
    let webhooks: WebhookDispatcher?
    /// The app's backend, asked about logins, subscribes and publishes, when configured.
    let authorizationHook: AuthorizationHook?
    /// The namespaces and the default capability, as configured or last reloaded.
    let accessRules: AccessRules
    /// Where channel messages get their numbers: at once on one node, through the backplane in
    /// a cluster (`PublishPath`).
    let publishing: any PublishPath
    /// Where STREAM connections' topic messages go: delivered at once on one node, committed
    /// through the backplane first in a cluster.
    let topicPublishing: any TopicPublishPath
    /// Cluster mode: the database link, the nodes and their metrics (Hub+Cluster).
    let cluster: ClusterStatus
    /// Where this node's session events go and which channels its log delivers here
    /// (`NodeLink`).
    let nodeLink: any NodeLink
    /// Locks (Hub+Locks): in memory on one node, in the database in a cluster.
    let locks: LockService
    /// Call invitations' changes to their store (Hub+Invitations, §1.8).
    let invitationWriter: InvitationWriter

    init(configuration: ServerConfiguration, loops: [any EventLoop], store: any UserMessageStore,
         serviceStore: any ServiceStore, invitationStore: any InvitationStore = InMemoryInvitationStore(), logger: Logger,
         webhooks: WebhookDispatcher? = nil, authorizationHook: AuthorizationHook? = nil) {
        self.configuration = configuration
        self.invitationWriter = InvitationWriter(store: invitationStore, logger: logger)
        self.logger = logger
        self.webhooks = webhooks
        self.authorizationHook = authorizationHook
        self.accessRules = AccessRules(namespaces: configuration.namespaces, defaultCapabilities: configuration.defaultCapabilities)
        // One node's locks are in memory; a cluster's in the database, whose metadata writes
        // check a lock guard in their own transaction (so that check is never asked here).
        // One node's embedded store becomes a `LocalServiceStore`, whose lock guards this node's
        // locks answer.
        let lockStore: any SharedLockStore
        let storageStore: any SharedServiceStore
        if let shared = configuration.sharedServices {
            (lockStore, storageStore) = (shared, shared)
        } else {
            let memory = MemoryLockStore()
            lockStore = memory
            storageStore = LocalServiceStore(serviceStore) { required, key in
                memory.holds(required.owner, lock: required.lockName, appId: key.appId, channel: key.target)
            }
        }
        self.locks = LockService(store: lockStore)
        let metrics = ServerMetrics()
        self.metrics = metrics
        let cluster = ClusterStatus(metrics: metrics, enabled: configuration.backplane != nil, probeInterval: configuration.clusterProbeInterval,
                                    logger: logger)
        self.cluster = cluster
        self.publishing = configuration.backplane.map { BackplanePublishPath(backplane: $0, status: cluster) } ?? LocalPublishPath()
        self.mailbox = UserMailbox(store: store, cap: configuration.userMessageCap, maxAge: configuration.userMessageMaxAge,
                                   dedupCapacity: configuration.dedupCapacity, resendWindow: configuration.userMessageResendWindow,
                                   commitDelay: configuration.userMessageCommitDelay, deadline: configuration.userMessageDeadline,
                                   timers: loops.first, logger: logger, metrics: metrics,
                                   onUndeliverable: Self.undeliverableHook(webhooks))
        var hubState = HubState(configuration: configuration)
        hubState.webhooks.isEnabled = webhooks != nil
        // The composition root: one node's log of session events hands them straight back; a
        // cluster's is the backplane's.
        self.nodeLink = configuration.backplane.map { BackplaneNodeLink(backplane: $0) } ?? LocalNodeLink()
        self.epoch = hubState.serverEpoch
        self.state = NIOLockedValueBox(hubState)
        var fanouts: [LoopFanout] = []
        var byLoop: [ObjectIdentifier: LoopFanout] = [:]
        for (index, loop) in loops.enumerated() {
            let fanout = LoopFanout(eventLoop: loop, index: index, maxOutboundBytes: configuration.maxOutboundBytes,
                                    livenessInterval: configuration.livenessCheckInterval)
            fanouts.append(fanout)
            byLoop[ObjectIdentifier(loop)] = fanout
        }
        self.fanouts = fanouts
        self.fanoutByLoop = byLoop
        // The composition root: one node's stream seams, or the cluster's (Hub+ClusterStream).
        let streamLink = configuration.backplane.map {
            BackplaneStreamLink(backplane: $0, instance: hubState.serverEpoch, status: cluster)
        }
        self.streams = StreamHub(limits: configuration.limits, instance: hubState.serverEpoch, webhooks: webhooks,
                                 link: streamLink ?? LocalStreamLink())
        self.topicPublishing = streamLink.map { BackplaneTopicPath(link: $0, logger: logger) } ?? LocalTopicPath()
        self.storage = StorageService(store: storageStore, limits: configuration.limits, logger: logger)
        // Receivers with a session on another node are online too (none on a single node: its
        // table of remote sessions stays empty).
        mailbox.setOnlineElsewhere { [unowned self] keys in
            read { $0.onlineElsewhere(keys) }
        }
        webhooks?.addSource { [unowned self] in modify { ($0.takeWebhookEvents(), []) } }
        storage.setChangeHandler({ [unowned self] key, kind, metadata, notifyAll in
            storageChanged(key, kind: kind, metadata: metadata, notifyAll: notifyAll)
        }, interested: { [unowned self] key in hasStorageSubscribers(key) })
    }

    /// The mailbox's report of undelivered user messages, as a webhook event.
    private static func undeliverableHook(_ webhooks: WebhookDispatcher?) -> (@Sendable (UserKey, Int) -> Void)? {
        guard let webhooks else { return nil }
        return { key, count in webhooks.undeliverable(key, count: count) }
    }

    static var wallMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    // MARK: connections

    /// The fan-out table (and liveness sweep) of an event loop.
    func fanout(for loop: any EventLoop) -> LoopFanout {
        fanoutByLoop[ObjectIdentifier(loop)]!
    }

    /// A new WebSocket connection: its handle, counted among the open connections.
    func register(_ channel: any Channel) -> ConnectionRef {
        let fanout = fanout(for: channel.eventLoop)
        return modify { ($0.register(channel, loopIndex: fanout.index), []) }
    }

    func unregister(_ connection: ConnectionRef) {
        modify { ($0.unregister(connection), []) }
    }

    /// Every open connection (for shutdown and metrics).
    var openConnections: [ConnectionRef] { read { $0.openConnections } }

    /// How many connections are open (upgraded WebSockets).
    var openConnectionCount: Int { read { $0.openConnectionCount } }

    /// Whether the server is draining (`RTMServer.drain()`).
    var isDraining: Bool { read { $0.isDraining } }

    /// Starts draining; false when it had started already.
    func startDraining() -> Bool {
        modify { ($0.startDraining(), []) }
    }

    /// Connection counts by kind, and the PCU peak.
    var connectionCounters: ConnectionCounters { read { $0.connectionCounters } }

    /// A MESSAGE connection logged in or a STREAM connection joined (`opened`), or one of them
    /// closed.
    func countConnection(_ kind: ConnectionCounters.Kind, opened: Bool) {
        modify { ($0.countConnection(kind, opened: opened), []) }
    }

    /// Logged-in sessions, online or within their grace window.
    var sessionCount: Int { read { $0.sessionCount } }

    /// Members of a channel (for tests and tools).
    func members(appId: String, channel: String) -> [String] {
        read { $0.members(of: ChannelKey(appId: appId, name: channel)) }
    }

    // MARK: presence

    /// setState / removeState; members are told (or the change waits for the interval event).
    func changeState(_ connection: ConnectionRef, channel: String, set: [String: String], remove: [String]) -> HubState.StateDecision {
        modify { state in
            let decision = state.changeState(connection, channel: channel, set: set, remove: remove, limits: configuration.limits,
                                             wallMillis: Self.wallMillis)
            guard case .changed(_, let broadcast?) = decision else { return (decision, [.wakeCluster]) }
            return (decision, [.broadcast(broadcast), .wakeCluster])
        }
    }

    func state(of userId: String, appId: String, channel: String) -> [String: String]? {
        read { $0.state(of: userId, appId: appId, channel: channel) }
    }

    func whoNow(appId: String, channel: String, after: String?) -> (snapshot: HubState.Snapshot, next: String?, total: Int) {
        read { $0.whoNow(appId: appId, channel: channel, after: after, pageSize: 100) }
    }

    func whereNow(_ user: UserKey) -> [String]? {
        read { $0.whereNow(user) }
    }

    // MARK: sessions

    /// A login. `confirmed`, in cluster mode for a new session: the login's reply waits for it
    /// (the user's sessions on other nodes have ended first, C-6).
    func login(key: UserKey, connection: ConnectionRef, resumeToken: String?, grantsIssuedAt: UInt32? = nil, heartbeat: TimeAmount,
               presenceTimeout: TimeAmount) -> (decision: HubState.LoginDecision, confirmed: EventLoopFuture<Void>?) {
        let now = NIODeadline.now()
        let loop = connection.channel.eventLoop
        return modify { state in
            let (decision, confirmed, actions) = state.onLogin(
                key: key, connection: connection, resumeToken: resumeToken, grantsIssuedAt: grantsIssuedAt, heartbeat: heartbeat,
                presenceTimeout: presenceTimeout,
                now: now, wallMillis: Self.wallMillis, makePromise: { loop.makePromise(of: Void.self) })
            return ((decision, confirmed), actions)
        }
    }

    /// A logged-in connection closed without logout: grace window, then timeout (P-1, P-2).
    func connectionLost(_ connection: ConnectionRef, lastSeen: NIODeadline) {
        let now = NIODeadline.now()
        modify { $0.onConnectionLost(connection, lastSeen: lastSeen, now: now) }
    }

    func logout(_ connection: ConnectionRef) {
        let now = NIODeadline.now()
        modify { $0.onLogout(connection, now: now, wallMillis: Self.wallMillis) }
    }

    func userKey(of connection: ConnectionRef) -> UserKey? {
        read { $0.userKey(of: connection) }
    }

    func connection(of key: UserKey) -> ConnectionRef? {
        read { $0.connection(of: key) }
    }

    // MARK: channels

    func subscribe(_ connection: ConnectionRef, channel: String, quiet: Bool, features: ChannelFeatures,
                   maxMembers: Int? = nil) -> HubState.SubscribeDecision {
        modify { $0.onSubscribe(connection, channel: channel, quiet: quiet, features: features, maxMembers: maxMembers, wallMillis: Self.wallMillis) }
    }

    func unsubscribe(_ connection: ConnectionRef, channel: String) -> Bool {
        modify { state in
            guard let actions = state.onUnsubscribe(connection, channel: channel, wallMillis: Self.wallMillis) else { return (false, []) }
            return (true, actions)
        }
    }

    /// A loop's local subscriber set of a channel changed between empty and non-empty.
    func setLoop(_ index: Int, hasSubscribers: Bool, channel: ChannelKey) {
        modify { ($0.setLoop(index, hasSubscribers: hasSubscribers, channel: channel), []) }
    }

    /// One message to publish.
    struct Outgoing: BinaryFrame.MessageBody {
        /// The request to acknowledge.
        let requestID: UInt64
        /// Client message id (M-3).
        let msgId: UInt64?
        let customType: String?
        let isText: Bool
        let payload: ByteBuffer
        /// Answered with a JSON `ok` (a JSON publish), else in a binary ack frame.
        var repliesInJSON = false
    }

    /// Publishes messages of one publisher to one channel: one lock, one encoded buffer, one hop
    /// per event loop with subscribers. Resends of published client message ids get their first
    /// sequence number and are not delivered again (M-3). Returns the sequence numbers and the
    /// channel epoch they belong to (M-2), read under the same lock.
    func publish(appId: String, channel: String, publisher: UserKey, messages: [Outgoing],
                 allocator: ByteBufferAllocator) -> (seqs: [UInt64], epoch: String) {
        let key = ChannelKey(appId: appId, name: channel)
        let dropSeq = configuration.testDropSeq
        return modify(inOrder: { state in
            let (seqs, epoch, buffer, loops) = state.publish(messages, channel: key, publisher: publisher, nowMillis: Self.wallMillis,
                                                       dropSeq: dropSeq, allocator: allocator)
            // Queued to each loop while the sequence numbers are still held: every loop receives
            // a channel's messages in sequence order, whoever published them.
            return ((seqs, epoch), buffer.map { .fanOut($0, messages: messages.count, channel: key, loops: loops) })
        })
    }

    func enqueueRaw(_ buffer: ByteBuffer, messages: Int, to channel: ChannelKey, loops: UInt64) {
        hop(to: loops) { fanout in fanout.deliverRaw(buffer, messages: messages, to: channel) }
    }

    /// What a returning subscriber missed in a channel (M-2). Call after the connection has
    /// joined the channel's fan-out, so that anything newer arrives live.
    func replay(appId: String, channel: String, after position: ChannelPosition) -> HubState.Replay {
        modify { ($0.replay(ChannelKey(appId: appId, name: channel), after: position, nowMillis: Self.wallMillis), []) }
    }

    /// Where a channel is now: its epoch and last sequence number (creating the channel).
    func channelPosition(appId: String, channel: String) -> ChannelPosition {
        modify { ($0.channelPosition(ChannelKey(appId: appId, name: channel)), []) }
    }

    // MARK: storage

    /// Subscribes `watcher` to storage events of `target`'s user metadata.
    func watchMetadata(of target: UserKey, watcher: String, on: Bool) {
        modify { ($0.watchMetadata(of: target, watcher: watcher, on: on), []) }
    }

    /// `key`'s session has new grants, from a capability token issued then (nil: from none):
    /// a resume with an older one is refused.
    func grantsChanged(_ key: UserKey, issuedAt: UInt32?) {
        modify { ($0.grantsChanged(key, issuedAt: issuedAt), []) }
    }

    /// The users whose metadata and whose online status `key` watches (its watches to decide
    /// again when its grants change).
    func watches(of key: UserKey) -> (metadata: [String], peers: Set<String>) {
        read { state in
            (Array(state.metadataWatches.targets(of: key)), state.peerStatus.targets(of: key))
        }
    }

    /// Ends `key`'s watches of these users' online status (its grants no longer allow them):
    /// no rate, no reply.
    func endPeerWatches(_ key: UserKey, users: [String]) {
        modify { ($0.peerStatus.unsubscribe(key, targets: users), []) }
    }

    /// A metadata set changed: channel members that asked for storage events, or the user's
    /// watchers, get the whole new set.
    private func storageChanged(_ key: StorageKey, kind: StorageEventKind, metadata: Metadata, notifyAll: Bool) {
        let frame = Self.storageEvent(key, kind: kind, metadata: metadata)
        modify { $0.storageChanged(key, frame: frame, notifyAll: notifyAll) }
    }

    static func storageEvent(_ key: StorageKey, kind: StorageEventKind, metadata: Metadata) -> Frame {
        var frame = Frame(type: .storage, event: kind.rawValue, ts: wallMillis)
        frame.storageType = key.type.rawValue
        if key.type == .channel { frame.channel = key.target } else { frame.userId = key.target }
        frame.metadata = metadata
        return frame
    }

    /// Closes every STREAM connection of a user (close 1000 with `reason`): its MESSAGE session
    /// ended (K-4: logout; token expiry; the grace window ran out).
    func closeStreams(of user: UserKey, reason: String = "the user logged out") {
        for connection in streams.connections(of: user) { Self.closeReplaced(connection, reason: reason) }
    }

    /// Sends an encoded JSON frame on a connection's channel, from any thread.
    static func sendEncoded(_ buffer: ByteBuffer, on channel: any Channel) {
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, data: buffer), promise: nil)
    }

    /// Sends a reply to a request of type `operation` like `send(_:on:)`; a refusal is counted
    /// in `rtm_requests_refused_total`.
    /// For the replies that leave off their connection's loop (stores, locks, the cluster);
    /// the connection's own replies are counted by `ConnectionHandler.send`.
    func reply(_ frame: Frame, to operation: FrameType, on channel: any Channel) {
        if frame.type == .error, let code = frame.code { metrics.refused(RTMErrorCode(rawValue: code), operation: operation) }
        Self.send(frame, on: channel)
    }

    /// Sends one JSON frame on a connection's channel, from any thread. Off the channel's event
    /// loop (the user-message store's thread, the storage's queue) the frame is encoded on that loop, so the
    /// JSON work is spread over the loops instead of piling up on one queue; the order of sends
    /// from one thread is kept either way.
    static func send(_ frame: Frame, on channel: any Channel) {
        guard channel.eventLoop.inEventLoop else {
            channel.eventLoop.execute { send(frame, on: channel) }
            return
        }
        sendEncoded(FrameCodec.encode(frame, allocator: channel.allocator), on: channel)
    }

    // MARK: effects

    func perform(_ broadcasts: [HubState.Broadcast]) {
        for broadcast in broadcasts {
            let buffer = FrameCodec.encode(broadcast.frame)
            enqueue(buffer, to: broadcast.channel, loops: broadcast.loops, except: broadcast.except?.id, requires: broadcast.requires)
            // Stream-channel members that joined withMetadata / withLock get these too.
            if broadcast.frame.type == .storage || broadcast.frame.type == .lock { streams.relayServiceEvent(buffer, of: broadcast.frame.type, channel: broadcast.channel) }
        }
    }

    /// One hop to each loop that has subscribers (never a synchronous write: the caller may hold
    /// the state lock, and the order of these hops is the order of delivery).
    private func enqueue(_ buffer: ByteBuffer, to channel: ChannelKey, loops: UInt64, except: UInt64?, requires: ChannelFeatures) {
        hop(to: loops) { fanout in fanout.deliver(buffer, to: channel, except: except, requires: requires) }
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

    /// Sends a last frame then closes the connection with a close frame (kick: 1000, token
    /// expiry: 1008, shutdown's goaway: 1001).
    static func close(_ connection: ConnectionRef, with frame: Frame, code: WebSocketErrorCode = .normalClosure, reason: String = "") {
        let channel = connection.channel
        let data = FrameCodec.encode(frame, allocator: channel.allocator)
        channel.eventLoop.execute {
            channel.pipeline.fireUserInboundEventTriggered(
                CloseWithFrameEvent(frame: WebSocketFrame(fin: true, opcode: .text, data: data), code: code, reason: reason))
        }
    }

    /// Closes a connection whose session moved to another connection (a resume, C-4), or whose
    /// session ended elsewhere (logout ends the STREAM connections): close frame 1000.
    static func closeReplaced(_ connection: ConnectionRef, reason: String) {
        let channel = connection.channel
        channel.eventLoop.execute { channel.pipeline.fireUserInboundEventTriggered(ReplacedEvent(reason: reason)) }
    }
}

/// Asks a connection's handler to write a last frame and close with `code`.
struct CloseWithFrameEvent: @unchecked Sendable {
    let frame: WebSocketFrame
    let code: WebSocketErrorCode
    let reason: String
}

/// Tells a connection's handler that its session is carried on elsewhere: close it (1000).
struct ReplacedEvent: Sendable {
    let reason: String
}
