import NIOCore
import RTMAuth
import RTMProtocol

/// Everything the server reads from configuration. Every timer has the SPEC's default; tests
/// shrink them to milliseconds.
public struct ServerConfiguration: Sendable {
    /// Address to bind.
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks a free one (see `RTMServer.port`).
    public var port: Int = 9600
    /// Known applications: app id → app certificate. A nil certificate accepts any token
    /// (the reference's "App ID only" mode); use it for development only.
    public var apps: [String: String?] = [:]
    /// Rules for the channels whose names match a pattern (`ChannelNamespace`: private, no
    /// client publishes, no presence, no history, at most N members), the first match winning.
    /// A channel in none keeps every default. `rtm serve --namespace 'PATTERN:OPTION,…'`.
    public var namespaces: [ChannelNamespace] = []
    /// The app's backend, asked whether logins, subscribes and publishes may go ahead (the
    /// namespaces say which subscribes and publishes); nil: never asked.
    /// `rtm serve --auth-hook URL --auth-hook-secret S`.
    public var authorizationHook: AuthorizationHookConfiguration?
    /// What a session whose login brought no capability token may do (channels and other
    /// users alike), as a capability token would grant it; nil: anything outside the private
    /// namespaces. `rtm serve --default-capability JSON`.
    public var defaultCapabilities: Capabilities?
    /// The redundancy added to a client's heartbeat interval before the server declares it lost
    /// (SPEC H-2: `heartbeatInterval + 10 s`).
    public var heartbeatSlack: TimeAmount = .seconds(10)
    /// How long a new connection may take, from its TCP accept, to send its HTTP request, upgrade
    /// and log in (or join) before it is closed, however it spends the time (silent, trickling
    /// bytes, pinging). See `ServerConnectionStateMachine` for every state's deadline.
    public var loginDeadline: TimeAmount = .seconds(12)
    /// Accepted range of the client's `heartbeatInterval`, seconds (SPEC H-1: [5, 1800]).
    public var heartbeatRange: ClosedRange<Double> = 5...1800
    /// Accepted range of the client's `presenceTimeout`, seconds (SPEC P-1: [5, 300]).
    public var presenceTimeoutRange: ClosedRange<Double> = 5...300
    /// Size and count limits.
    public var limits = Limits()
    /// Publishes (channel + user messages) per second per connection (SPEC §8: 60). 0 = unlimited.
    public var publishRatePerSecond: Double = 60
    /// Error replies per second one connection may receive on average, after a burst of
    /// `errorReplyBurst`. A connection that keeps sending rejected requests past it (say,
    /// publishing far over its rate limit and ignoring the errors) is closed with code 1008
    /// "too many rejected requests": a flood must not cost its neighbours. 0 = unlimited.
    public var errorReplyRatePerSecond: Double = 100
    /// Error replies one connection may receive at once before `errorReplyRatePerSecond` applies.
    public var errorReplyBurst: Double = 1000
    /// Logins admitted per second across the server (admission control, SPEC T-9). 0 = unlimited.
    public var loginRatePerSecond: Double = 2_000
    /// Bytes queued for one connection before it counts as a consumer that cannot keep up and is
    /// disconnected (its memory is then released).
    public var maxOutboundBytes: Int = 4 * 1024 * 1024
    /// Client sockets held at once; one more is closed as soon as it is accepted. nil (the
    /// default): the process's open-file limit (`ulimit -n`) less 128 kept for the server's own
    /// files, so that a flood of connections can never leave it unable to open a database
    /// connection or a file.
    public var maxConnections: Int?
    /// How long a closing connection may take to flush its last frames before it is dropped.
    public var closeTimeout: TimeAmount = .seconds(1)
    /// How long a graceful shutdown waits for clients to take their `goaway` before closing hard.
    public var shutdownGrace: TimeAmount = .seconds(1)
    /// Drain (`RTMServer.drain()`, SIGTERM): clients sent `goaway` per second, so that the
    /// fleet does not reconnect in one spike (default 1,000). At least 0.001 (smaller values
    /// are raised to it; `rtm serve --drain-rate` refuses them).
    public var drainRate: Double = 1_000
    /// Drain: how often a batch of `goaway` frames goes out (`drainRate × drainBatchInterval`
    /// clients per batch; default 100 ms).
    public var drainBatchInterval: TimeAmount = .milliseconds(100)
    /// Drain: how long to wait for every client to go before shutting down anyway (default 30 s).
    public var drainTimeout: TimeAmount = .seconds(30)
    /// Drain: the spread suggested to clients in `goaway` (`reconnectDelay`): each waits a
    /// random delay up to this before reconnecting (default 1 s; zero: at once).
    public var drainReconnectSpread: TimeAmount = .seconds(1)
    /// Where the embedded store keeps its database (`rtm.sqlite`); nil = in memory (tests).
    public var dataDirectory: String?
    /// fsync every commit (survives power loss); by default a commit survives the process being
    /// killed at any moment, which is what SPEC M-1 asks.
    public var storeFullSync = false
    /// User messages kept per receiver until acknowledged (SPEC M-1: 200); the oldest go first.
    public var userMessageCap = 200
    /// How long an unacknowledged user message is kept (SPEC M-1: 7 days).
    public var userMessageMaxAge: TimeAmount = .hours(7 * 24)
    /// How far back a reconnecting subscriber gets a channel's messages again (SPEC M-2: 30 s).
    public var channelReplayWindow: TimeAmount = .seconds(30)
    /// At most this many replayed messages per channel (SPEC M-2: 32).
    public var channelReplayMax = 32
    /// Client message ids remembered per sender to answer resends without acting twice (M-3).
    public var dedupCapacity = 1024
    /// How long a publisher's client message ids are still remembered after its last session
    /// ended (SPEC M-3; default 60 s, as for user messages): a channel publish resent from a new
    /// session (after an error whose outcome was unknown, or through another node of a cluster)
    /// within this gets its first `seq` and is not delivered again. While the user has a session
    /// the ids are remembered anyway (the last `dedupCapacity`).
    public var publishResendWindow: TimeAmount = .seconds(60)
    /// How long the user-message store recognises a resend (same sender, same `msgId`), also
    /// after a restart or through another node (SPEC M-3; default 60 s, six times the SDK's
    /// default request timeout: the SDK resends only while the request waits for its reply).
    public var userMessageResendWindow: TimeAmount = .seconds(60)
    /// How long a user message that finds the store idle waits for others to share its commit
    /// (group commit; default 1 ms). Under load commits run back to back and nothing waits; at a
    /// light load each commit would otherwise hold one message and cost its own thread
    /// hand-offs (about 50 µs of CPU per message at 5,000 messages/s). 0: commit at once.
    public var userMessageCommitDelay: TimeAmount = .milliseconds(1)
    /// A `sendUser` is answered within this (default 10 s, the SDK's request timeout): stored,
    /// or refused with its id. A message that could not be handed to the store in time (the
    /// store slow or unreachable: commits before it took the time) is refused without being
    /// stored; a commit that has begun is waited for only as long as its oldest message has left.
    public var userMessageDeadline: TimeAmount = .seconds(10)
    /// A channel with more visible members than this reports presence in interval mode
    /// (aggregated changes every `presenceInterval`) instead of an event per change (default 50).
    public var presenceIntervalThreshold = 50
    /// Period of interval-mode presence events (default 30 s).
    public var presenceInterval: TimeAmount = .seconds(30)
    /// Interval mode: a leave followed by a rejoin within this is not reported (default 2 s).
    public var presenceDebounce: TimeAmount = .seconds(2)
    /// Accepted lock TTLs, seconds (§2.12: 10–300; tests lower the bound).
    public var lockTTLRange: ClosedRange<Int> = 10...300
    /// How long stored history is kept (§2.8; the reference offers 1, 7, 30, 90, 365 days or
    /// forever: nil).
    public var historyRetention: TimeAmount? = .hours(7 * 24)
    /// A STREAM connection that sends nothing for this long is dropped (its client pings every
    /// 0.5 s, SPEC H-3).
    public var streamIdleTimeout: TimeAmount = .seconds(2)
    /// How often each event loop checks its connections' read deadlines (heartbeat timeout,
    /// stream timeout): a silent connection is dropped at most this long after its timeout.
    public var livenessCheckInterval: TimeAmount = .milliseconds(250)
    /// How often the server checks whether it holds memory it no longer uses (its resident size
    /// grew by 16 MiB since the last check that trimmed) and gives it back to the system;
    /// zero: never (default 10 s).
    public var memoryTrimInterval: TimeAmount = .seconds(10)
    /// Test flag: the channel message with this sequence number is acknowledged but never
    /// delivered, so a benchmark can show that it counts a lost message. Never set in production.
    public var testDropSeq: UInt64?
    /// Peer online status (AGORA_REFERENCE §1.7): a logged-in user the server has heard nothing
    /// from for longer than this (or 1.2 × its heartbeat interval, if longer) is `unreachable`
    /// (default 6 s). It is `offline` when its session ends: logout, or its grace window
    /// (`heartbeatInterval + heartbeatSlack + presenceTimeout`, 30 s by default, SPEC P-1).
    public var peerUnreachableAfter: TimeAmount = .seconds(6)
    /// Users per queryPeersOnlineStatus / subscribe / unsubscribe call (§1.7: 256).
    public var peerStatusMaxUsersPerCall = PeerStatusLimits.maxUsersPerCall
    /// Peers one user may watch at once (§1.7: 512).
    public var peerStatusMaxSubscribed = PeerStatusLimits.maxSubscribedPeers
    /// Peer status calls per second per user, for queries and for (un)subscriptions each, after a
    /// burst of `peerStatusBurst` (§1.7: 10 per 5 s). 0 = unlimited.
    public var peerStatusRatePerSecond: Double = 2
    /// Peer status calls one user may make at once before `peerStatusRatePerSecond` applies.
    public var peerStatusBurst: Double = 10
    /// Call invitations (§1.8): never delivered to an online callee this long after sending →
    /// the caller's invitation fails with `remoteOffline` (30 s).
    public var invitationRemoteOfflineTimeout: TimeAmount = .seconds(30)
    /// Delivered but not acknowledged by the callee's SDK this long after sending →
    /// `remoteNoResponse` (30 s).
    public var invitationNoResponseTimeout: TimeAmount = .seconds(30)
    /// Acknowledged but neither accepted, refused nor canceled this long after sending →
    /// `expire` on both sides (60 s).
    public var invitationExpiry: TimeAmount = .seconds(60)
    /// Invitations one caller may have open (sent, not yet ended) at once; beyond, `invite` is
    /// refused with -10021 (a flood must not cost the server's memory).
    public var invitationMaxOpenPerCaller = 100
    /// Channels per getChannelMemberCount call (§1.5: 32).
    public var memberCountMaxChannels = 32
    /// getChannelMemberCount calls per second per user (§1.5: 1). 0 = unlimited.
    public var memberCountRatePerSecond: Double = 1
    /// The admin API and web console's key (`Authorization: Bearer <key>`). Nil (the default):
    /// the admin listener is not started at all.
    public var adminKey: String?
    /// Address of the admin listener, apart from the client endpoint; loopback by default.
    public var adminHost: String = "127.0.0.1"
    /// Port of the admin listener (0 = any free port, see `RTMServer.adminPort`).
    public var adminPort: Int = 9601
    /// An admin HTTP connection that sends nothing for this long is closed.
    public var adminIdleTimeout: TimeAmount = .seconds(60)
    /// TLS certificate chain (PEM) for the admin listener: it then serves `https://` only (the
    /// admin key no longer crosses the network in clear); with `adminTLSKeyPath`. Nil (the
    /// default): plain HTTP, meant for loopback. Reloaded with the client port's certificate.
    public var adminTLSCertificatePath: String?
    /// TLS private key (PEM) matching `adminTLSCertificatePath`.
    public var adminTLSKeyPath: String?
    /// TLS certificate chain (PEM) for `wss://`; with `tlsKeyPath`. Both nil (the default) =
    /// plain `ws://`. `RTMServer.reloadTLSCertificate()` (SIGHUP in `rtm serve`) reads the files
    /// again for new connections.
    public var tlsCertificatePath: String?
    /// TLS private key (PEM) matching `tlsCertificatePath`.
    public var tlsKeyPath: String?
    /// Webhook events POSTed to a URL (online/offline, channel join/leave, undeliverable user
    /// messages); nil (the default) = none.
    public var webhook: WebhookConfiguration?
    /// Event-loop threads; defaults to the number of cores.
    public var threads: Int = System.coreCount
    /// Cluster mode: channel publishes cross nodes through this backplane (e.g.
    /// RTMPostgres' `PostgresChannelBackplane`, `rtm serve --postgres URL`). nil (the default):
    /// a single node, the in-process path.
    public var backplane: (any ChannelBackplane)?
    /// Cluster mode: metadata, history and locks in a store every node shares (e.g.
    /// RTMPostgres' `PostgresServices`), instead of the embedded SQLite store and the
    /// in-process locks. nil (the default): a single node.
    public var sharedServices: (any SharedServices)?
    /// Where a single node keeps its call invitations so that they survive a restart (§1.8).
    /// nil (the default): `invitations.sqlite` in `dataDirectory`; in memory without a data
    /// directory. Not used in cluster mode, where the backplane's log keeps them.
    public var invitationStore: (any InvitationStore)?
    /// Cluster mode: the longest a new login's reply waits for the user's sessions on other
    /// nodes to end (SPEC C-6 across nodes; default 3 s). Normally a few milliseconds: the
    /// login's own event and the other node's `ended` through the database. Past it (the
    /// database unreachable) the login goes ahead. Also the longest a call invitation request
    /// waits for its event to come back from the log; past it, it is refused with its outcome
    /// unknown (§1.8).
    public var clusterLoginTimeout: TimeAmount = .seconds(3)
    /// Cluster mode: how long after a failed follow (the database could not be read for a
    /// channel's position) a channel with subscribers on this node is asked for again
    /// (default 1 s); its subscribers are then sent what they missed, or a `gap`.
    public var clusterFollowRetryInterval: TimeAmount = .seconds(1)
    /// Cluster mode: while the database link is down because a commit failed (the listening
    /// connection still up), how often one publish is let through to find out whether the
    /// database answers again (default 1 s); the others are refused at once meanwhile.
    public var clusterProbeInterval: TimeAmount = .seconds(1)
    /// Cluster mode: where the other nodes reach this node's `GET /health` ("host:port"), to
    /// ask it whether it reaches the database when they cannot (a node cut off from it sends
    /// its clients away; in an outage for every node they stay). Default: the listening host
    /// (the host name when listening on every interface) and port. A node serving TLS on its
    /// client port is not asked (it counts as not reaching the database).
    public var clusterAddress: String?
    /// Cluster mode: how long a node that lost the database waits for another node's
    /// `/health` answer, and then, told that another node reaches the database, for its own
    /// try of it before it counts as cut off (default 1 s; a cut-off node's clients are sent
    /// away up to this much later).
    public var clusterPeerProbeTimeout: TimeAmount = .seconds(1)
    /// Cluster mode: how often a node releases the locks that are due and tries its waiters
    /// again (default 1 s: a lock is released at most this long after its TTL ran out).
    public var lockSweepInterval: TimeAmount = .seconds(1)

    /// The defaults.
    public init() {}
}

/// A setting a reload (SIGHUP) cannot use; the current one stays.
public struct ServerConfigurationError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, naming the setting.
    public let description: String
    init(_ description: String) { self.description = description }
}
