import DequeModule
import NIOCore
import RTMProtocol

/// The server's global state: sessions by user, channel membership (presence), sequence numbers
/// and which event loops have subscribers of a channel. A plain value: every event is a
/// `mutating func` that returns what to do; `Hub` holds it under one lock and performs the
/// effects after releasing it.
struct HubState {
    struct Session {
        let id: UInt64
        let key: UserKey
        let resumeToken: String
        var connection: ConnectionRef?
        var channels: Set<String> = []
        var heartbeat: TimeAmount
        var presenceTimeout: TimeAmount
        /// Bumped on every loss and return, so a stale grace timer does nothing.
        var generation: UInt64 = 0
        /// When the capability token of its current grants was issued (`iat`; nil: its grants
        /// came from no token): a resume with an older one is refused.
        var grantsIssuedAt: UInt32?
    }

    struct ChannelState {
        /// Names this incarnation of the channel's sequence numbers: a channel forgotten and
        /// created again (or a restarted server) starts a new epoch (SPEC M-2). In a cluster,
        /// the backplane's epoch (HubState+Cluster).
        var epoch: String
        /// The members (presence), by user id.
        var members: [String: Member] = [:]
        /// How many of them are not quiet.
        var visible = 0
        /// Interval mode: the changes since the last interval event.
        var interval = IntervalChanges()
        /// Last assigned sequence number.
        var seq: UInt64 = 0
        /// Bit i set: event loop i has local subscribers.
        var loops: UInt64 = 0
        /// The last messages, for replay to returning subscribers (M-2).
        var recent: Deque<RecentMessage> = []
        /// How long and how many of them are kept (the server's, or the channel's namespace's).
        var replayWindowMillis: Int64
        var replayMax: Int
    }

    /// A published channel message kept for replay (encoded when replayed).
    struct RecentMessage: BinaryFrame.MessageBody {
        let seq: UInt64
        let millis: Int64
        let publisher: String
        let customType: String?
        let isText: Bool
        let payload: ByteBuffer
        /// Cluster mode: a resend committed twice (through two nodes), kept only for its number:
        /// never sent, so a replay across it counts nothing as lost (M-3).
        var resent = false
    }

    /// A presence event to send to a channel's subscribers (those that want presence), except
    /// one connection.
    struct Broadcast: Sendable {
        let channel: ChannelKey
        let frame: Frame
        let loops: UInt64
        let except: ConnectionRef?
        /// Only subscribers that asked for this kind of event get it.
        var requires: ChannelFeatures = .presence
    }

    enum LoginDecision {
        case rejected(RequestRefusal)
        case admitted(Admission)
    }

    struct Admission {
        let sessionID: UInt64
        let resumeToken: String
        let resumed: Bool
        /// Channels the resumed session is in; the new connection serves them at once.
        let channels: [String]
        /// Of those, the event kinds each was subscribed with.
        var features: [String: ChannelFeatures] = [:]
        /// The same session's previous connection (half-open, or a race): close it quietly.
        let replaced: ConnectionRef?
        /// Another client's connection for the same user: tell it it was kicked, then close (C-6).
        let kicked: ConnectionRef?
        /// Leave events for the kicked session's channels.
        let broadcasts: [Broadcast]
    }

    enum SubscribeDecision {
        case rejected(RequestRefusal)
        case subscribed(snapshot: Snapshot, join: Broadcast?)
    }

    struct GraceTimer: Sendable, Equatable {
        let key: UserKey
        let generation: UInt64
        let deadline: NIODeadline
    }

    /// This node's sessions, by user and by connection.
    var sessions = SessionTable()
    /// The channels this node holds state for, their epochs and replay limits.
    var channels: ChannelTable
    private var loginLimiter: RateLimiter
    /// The per-connection rates (SPEC §8), as configured or last reloaded: a connection takes
    /// them when it opens (its state machine's budgets), open ones are given new ones.
    private(set) var connectionRates: ConnectionRates
    let heartbeatSlack: TimeAmount
    private let maxChannels: Int
    /// Above this many members a channel's presence goes to interval mode.
    let presenceIntervalThreshold: Int
    /// Interval mode: a leave is reported only if no rejoin follows within this.
    let presenceDebounceMillis: Int64

    /// Random per server start; single-node channel epochs derive from it.
    let serverEpoch = String(UInt32.random(in: 1...UInt32.max), radix: 36)
    /// Cluster mode: the channels the backplane delivers to this node (HubState+Interest).
    var interest: ChannelInterest
    /// Each publisher's recent client message ids → the number they got (M-3).
    var resends: PublishResendMemory
    /// Who watches whose user metadata, both ways (§2.11).
    var metadataWatches = MetadataWatches()
    /// Peer online status subscriptions (HubState+PeerStatus, §1.7).
    var peerStatus: PeerStatusRegistry
    /// Channel messages published since start (the admin API's counters).
    var publishedMessages: UInt64 = 0
    /// The other nodes' sessions, and this node's events for the log (HubState+ClusterSessions).
    var cluster: ClusterReplica
    /// Cluster mode: new logins whose reply waits for the cluster, by session id
    /// (HubState+Events).
    var loginWaiters: [UInt64: EventLoopPromise<Void>] = [:]
    /// Call invitations (HubState+Signaling, §1.8).
    var invitations: InvitationTable
    /// Cluster mode: invitation events from the log, and requests waiting for theirs
    /// (HubState+InvitationLog).
    var invitationLog = InvitationLog()
    /// Webhook events not yet taken by the dispatcher.
    var webhooks = WebhookOutbox()
    /// Open WebSocket connections, their counts, drain.
    var connections = ConnectionRegistry()
    /// The periods and waits of the hub's timers (HubState+Timers).
    let timing: Timing

    init(configuration: ServerConfiguration) {
        self.connectionRates = ConnectionRates(ConnectionLimits(configuration))
        self.loginLimiter = RateLimiter(ratePerSecond: configuration.loginRatePerSecond)
        self.heartbeatSlack = configuration.heartbeatSlack
        self.maxChannels = configuration.limits.maxChannelsPerClient
        self.resends = PublishResendMemory(capacity: configuration.dedupCapacity,
                                           windowMillis: configuration.publishResendWindow.nanoseconds / 1_000_000)
        self.presenceIntervalThreshold = configuration.presenceIntervalThreshold
        self.presenceDebounceMillis = configuration.presenceDebounce.nanoseconds / 1_000_000
        self.peerStatus = PeerStatusRegistry(configuration: configuration)
        self.invitations = InvitationTable(configuration: configuration)
        self.timing = Timing(configuration: configuration)
        self.channels = ChannelTable(runEpoch: serverEpoch, namespaces: configuration.namespaces,
                                     replayWindowMillis: configuration.channelReplayWindow.nanoseconds / 1_000_000,
                                     replayMax: max(0, configuration.channelReplayMax))
        self.interest = ChannelInterest(followsEverything: configuration.backplane == nil)
        let node = configuration.backplane?.node
        // This run of the node (its run epoch, as the stream link's): a restarted node is a new
        // instance to the others.
        self.cluster = ClusterReplica(instance: "\(node ?? "local")#\(serverEpoch)", clusterNode: node)
    }

    /// New namespaces (a reload): for new sessions and the channels created from now on.
    mutating func reload(namespaces: [ChannelNamespace]) {
        channels.reload(namespaces: namespaces)
    }

    /// New per-connection rates (a reload): for the connections opened from now on.
    mutating func reload(connectionRates: ConnectionRates) {
        self.connectionRates = connectionRates
    }

    // MARK: sessions

    /// A verified login. Resumes the session when `resumeToken` matches (P-1), otherwise starts a
    /// new one, kicking any other client of the same user (C-6).
    mutating func login(
        key: UserKey, connection: ConnectionRef, resumeToken: String?, grantsIssuedAt: UInt32? = nil,
        heartbeat: TimeAmount, presenceTimeout: TimeAmount, now: NIODeadline, wallMillis: Int64
    ) -> LoginDecision {
        guard loginLimiter.tryAcquire(now: now) else {
            // SPEC T-9: admission control; clients back off and retry.
            return .rejected(RequestRefusal(code: .loginNoServerResources, reason: "server busy: too many logins per second; retry later"))
        }
        if let session = sessions[key] {
            if let resumeToken, resumeToken == session.resumeToken {
                // No going back: a resume with a capability token issued before the session's
                // current one (or with none, after one) would widen a narrowed session.
                if let refusal = SessionAccess.goingBack(issued: grantsIssuedAt, current: session.grantsIssuedAt, of: "the resumed session's") {
                    return .rejected(refusal)
                }
                let resumed = sessions.resume(key, on: connection, heartbeat: heartbeat, presenceTimeout: presenceTimeout,
                                              grantsIssuedAt: grantsIssuedAt)
                var features: [String: ChannelFeatures] = [:]
                for name in session.channels {
                    features[name] = channels[ChannelKey(appId: key.appId, name: name)]?.members[key.userId]?.features
                }
                return .admitted(Admission(
                    sessionID: session.id, resumeToken: session.resumeToken, resumed: true,
                    channels: session.channels.sorted(), features: features, replaced: resumed?.replaced, kicked: nil, broadcasts: []))
            }
            // Another client instance: the older one is kicked and its session ends (the new
            // session's `started` tells the other nodes).
            let kicked = session.connection
            let broadcasts = endSession(key, event: .remoteLeave, wallMillis: wallMillis, announce: false)
            let admission = newSession(key: key, connection: connection, heartbeat: heartbeat, presenceTimeout: presenceTimeout,
                                       grantsIssuedAt: grantsIssuedAt)
            return .admitted(Admission(
                sessionID: admission.id, resumeToken: admission.resumeToken, resumed: false,
                channels: [], replaced: nil, kicked: kicked, broadcasts: broadcasts))
        }
        // A session of another node (P-1 across nodes).
        if let resumeToken, let admission = resumeFromCluster(key, token: resumeToken, connection: connection,
                                                               heartbeat: heartbeat, presenceTimeout: presenceTimeout) {
            return .admitted(admission)
        }
        let session = newSession(key: key, connection: connection, heartbeat: heartbeat, presenceTimeout: presenceTimeout,
                                 grantsIssuedAt: grantsIssuedAt)
        return .admitted(Admission(
            sessionID: session.id, resumeToken: session.resumeToken, resumed: false,
            channels: [], replaced: nil, kicked: nil, broadcasts: []))
    }

    private mutating func newSession(key: UserKey, connection: ConnectionRef, heartbeat: TimeAmount, presenceTimeout: TimeAmount,
                                     grantsIssuedAt: UInt32?) -> Session {
        let session = sessions.start(key, on: connection, heartbeat: heartbeat, presenceTimeout: presenceTimeout,
                                     grantsIssuedAt: grantsIssuedAt)
        announceStarted(key)
        return session
    }

    /// The session's connection closed without a logout: start the grace window (SPEC P-1, H-2).
    /// The user stays a member everywhere until the timer fires.
    mutating func connectionLost(_ connection: ConnectionRef, lastSeen: NIODeadline, now: NIODeadline) -> GraceTimer? {
        guard let session = sessions.disconnect(connection) else { return nil }
        let key = session.key
        // Window from the last sign of life: heartbeatInterval + slack + presenceTimeout (SPEC T-8).
        let deadline = max(now, lastSeen + session.heartbeat + heartbeatSlack + session.presenceTimeout)
        return GraceTimer(key: key, generation: session.generation, deadline: deadline)
    }

    /// The grace window ended. If the user has not come back, it times out everywhere (SPEC P-2).
    mutating func graceExpired(_ timer: GraceTimer, wallMillis: Int64) -> [Broadcast] {
        guard let session = sessions[timer.key], session.connection == nil,
              session.generation == timer.generation else { return [] }
        return endSession(timer.key, event: .remoteTimeout, wallMillis: wallMillis)
    }

    /// Explicit logout: members are told at once (SPEC P-4, H-4).
    mutating func logout(_ connection: ConnectionRef, wallMillis: Int64) -> [Broadcast] {
        guard let key = sessions.key(of: connection) else { return [] }
        return endSession(key, event: .remoteLeave, wallMillis: wallMillis)
    }

    /// Ends a session and its memberships. `announce`: the other nodes of a cluster are told
    /// (`ended`); false when they learn it otherwise (a newer login's `started`) or told us.
    mutating func endSession(_ key: UserKey, event: PresenceEventKind, wallMillis: Int64, announce: Bool = true) -> [Broadcast] {
        guard let session = sessions.remove(key) else { return [] }
        publisherMayHaveLeft(key, wallMillis: wallMillis)
        cluster.sessionEnded(session, timedOut: event == .remoteTimeout, announce: announce)
        // Its user-metadata subscriptions end with it (a new session subscribes again).
        metadataWatches.endWatches(of: key)
        return session.channels.sorted().compactMap {
            removeMember(key, channel: $0, event: event, except: nil, wallMillis: wallMillis, session: session.id)
        }
    }

    /// A session of `key` ended (here or on another node): once the user has none anywhere,
    /// its remembered message ids go `publishResendWindow` later (M-3: a resend from its next
    /// session, or through another node, is recognised until then). Without an end the table
    /// would grow with every user that ever published, for the whole uptime. Memories due by
    /// now go at the same time.
    mutating func publisherMayHaveLeft(_ key: UserKey, wallMillis: Int64) {
        if sessions[key] == nil, cluster.remote[key] == nil { resends.publisherLeft(key, nowMillis: wallMillis) }
        for due in resends.due(nowMillis: wallMillis) where sessions[due] == nil && cluster.remote[due] == nil {
            resends.forget(due)
        }
    }

    /// The live session key of a connection, if it is logged in.
    func userKey(of connection: ConnectionRef) -> UserKey? { sessions.key(of: connection) }

    /// The connection currently serving a user, if online.
    func connection(of key: UserKey) -> ConnectionRef? { sessions[key]?.connection }

    // MARK: channels

    mutating func subscribe(_ connection: ConnectionRef, channel name: String, quiet: Bool, features: ChannelFeatures,
                            maxMembers: Int? = nil, wallMillis: Int64) -> SubscribeDecision {
        guard let key = sessions.key(of: connection), let session = sessions[key] else {
            return .rejected(RequestRefusal(code: .notLogin, reason: "not logged in"))
        }
        let channelKey = ChannelKey(appId: key.appId, name: name)
        if session.channels.contains(name) {
            // Subscribing again changes the event options (since 2.2.1 subscribe may be repeated).
            var state = channels.take(channelKey)
            state.members[key.userId]?.features = features
            channels.put(state, for: channelKey)
            if let member = state.members[key.userId] {
                cluster.announce(key, session: session.id, channel: name,
                                 .join(ClusterMember(quiet: member.quiet, features: features.rawValue, state: member.state)))
            }
            return .subscribed(snapshot: snapshot(state), join: nil)
        }
        guard session.channels.count < maxChannels else {
            return .rejected(RequestRefusal(code: .channelInstanceExceedLimitation, reason: "already subscribed to \(maxChannels) channels, the limit per client"))
        }
        // The namespace's member limit (a member of another session of the user is replaced, not added).
        let members = channels[channelKey]?.members
        if let maxMembers, members?[key.userId] == nil, (members?.count ?? 0) >= maxMembers {
            return .rejected(RequestRefusal(code: .channelSubscribeFailed, reason: "channel '\(name)' is full: \(maxMembers) members, its namespace's limit"))
        }
        var state = channels.take(channelKey)
        sessions.join(key, channel: name)
        // A member left by another node's older session of the user (in a cluster) is replaced.
        state.put(Member(sessionID: session.id, quiet: quiet, features: features), for: key.userId)
        channels.put(state, for: channelKey)
        cluster.announce(key, session: session.id, channel: name, .join(ClusterMember(quiet: quiet, features: features.rawValue, state: [:])))
        let join = quiet ? nil : presenceChange(channelKey, .remoteJoin, user: key.userId, except: connection, wallMillis: wallMillis)
        return .subscribed(snapshot: snapshot(channels[channelKey] ?? state), join: join)
    }

    /// Intentional leave of one channel (SPEC P-4). Nil when not subscribed.
    mutating func unsubscribe(_ connection: ConnectionRef, channel name: String, wallMillis: Int64) -> Broadcast?? {
        guard let key = sessions.key(of: connection), let session = sessions[key] else { return nil }
        guard sessions.leave(key, channel: name) else { return .some(nil) }
        cluster.announce(key, session: session.id, channel: name, .leave)
        return .some(removeMember(key, channel: name, event: .remoteLeave, except: connection, wallMillis: wallMillis, session: session.id))
    }

    /// Removes a member (and its temporary state, P-2/P-4) and tells the others. `session`: only
    /// that session's membership (in a cluster a newer session of the user may hold the place).
    mutating func removeMember(_ key: UserKey, channel name: String, event: PresenceEventKind, except: ConnectionRef?, wallMillis: Int64,
                               session: UInt64? = nil) -> Broadcast? {
        let channelKey = ChannelKey(appId: key.appId, name: name)
        guard var state = channels[channelKey], let found = state.members[key.userId],
              session == nil || found.sessionID == session else { return nil }
        let member = state.members.removeValue(forKey: key.userId) ?? found
        if !member.quiet { state.visible -= 1 }
        channels.put(state, for: channelKey)
        let broadcast = member.quiet ? nil : presenceChange(channelKey, event, user: key.userId, except: except, wallMillis: wallMillis)
        channels.pruneIfUnused(channelKey)
        return broadcast
    }

    /// A loop's local subscriber set for a channel became non-empty (`true`) or empty.
    mutating func setLoop(_ index: Int, hasSubscribers: Bool, channel: ChannelKey) {
        channels.setLoop(index, hasSubscribers: hasSubscribers, channel: channel)
    }
}
