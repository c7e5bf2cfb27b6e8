import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import RTMServer

/// The PostgreSQL `ChannelBackplane` (`rtm serve --postgres URL`): channel messages
/// of every node in one log (`PostgresChannelLog`), appended in group commits
/// (`ChannelLogWriter`) and followed by every node (`ChannelLogFollower`), so that a publish on
/// any node reaches the subscribers of every node, in one order per channel, with one sequence
/// and epoch per channel for the whole cluster.
///
/// Each node also holds a lease in `rtm_node` (`NodeRegistry`: the others declare it dead when
/// it stops renewing) and, now and then, one node trims the log (`ChannelLogRetention`).
///
/// One pool of `poolSize` connections (appends, reads, NOTIFY, trims), the follower's dedicated
/// `LISTEN` connection, and one connection for the lease alone, so that a node busy with
/// publishes still renews its lease in time (a lapse would get it declared dead and fenced).
/// The schema is created or migrated at `start`.
public final class PostgresChannelBackplane: ChannelBackplane {
    /// This node's name, stored with every message it appends.
    public let node: String
    private let client: PostgresClient
    /// The lease's own connection (`NodeRegistry`).
    private let leaseClient: PostgresClient
    private let writer: ChannelLogWriter
    private let log: PostgresChannelLog
    private let follower: ChannelLogFollower
    private let logger: Logger
    private let tasks = NIOLockedValueBox<[Task<Void, Never>]>([])

    private let registry: NodeRegistry
    private let retention: ChannelLogRetention

    /// - Parameters:
    ///   - node: this node's name (`rtm serve --node-id`), unique in the cluster.
    ///   - options: pool size and timers (`PostgresBackplaneOptions`' defaults).
    ///   - listener: the node's shared listening connection (`PostgresListener`); nil: one of
    ///     the follower's own.
    public init(location: PostgresLocation, node: String, options: PostgresBackplaneOptions = .init(), listener: PostgresListener? = nil,
                logger: Logger) {
        self.node = node
        self.logger = logger
        self.publishDeadline = options.callTimeout
        let client = PostgresClient(configuration: location.clientConfiguration(connections: options.poolSize), backgroundLogger: logger)
        self.client = client
        let log = PostgresChannelLog(client: client, callTimeout: options.callTimeout, resendWindow: options.resendWindow, logger: logger)
        self.log = log
        self.writer = ChannelLogWriter(log: log, node: node)
        self.follower = ChannelLogFollower(log: log, location: location, pollInterval: options.pollInterval,
                                           quietPollInterval: options.quietPollInterval, holdback: options.holdback,
                                           retryInterval: options.retryInterval, resendWindow: options.resendWindow,
                                           resendMemory: options.resendMemory, listener: listener, interest: .followed, logger: logger)
        let leaseClient = PostgresClient(configuration: location.clientConfiguration(connections: 1), backgroundLogger: logger)
        self.leaseClient = leaseClient
        self.registry = NodeRegistry(client: leaseClient, node: node, interval: options.leaseInterval, lease: options.lease,
                                     callTimeout: options.callTimeout, logger: logger)
        self.retention = ChannelLogRetention(client: client, retention: options.retention, interval: options.trimInterval, logger: logger)
    }

    /// - Parameters:
    ///   - node: this node's name (`rtm serve --node-id`).
    ///   - poolSize: the pool's connections (default 4).
    ///   - pollInterval: the follower's fallback read interval (default 100 ms).
    ///   - holdback: how long a missing number is waited for before it is skipped (default 5 s).
    public convenience init(location: PostgresLocation, node: String, poolSize: Int = 4, pollInterval: TimeAmount = .milliseconds(100),
                            holdback: TimeAmount = .seconds(5), logger: Logger) {
        var options = PostgresBackplaneOptions()
        options.poolSize = poolSize
        options.pollInterval = pollInterval
        options.holdback = holdback
        self.init(location: location, node: node, options: options, logger: logger)
    }

    public func start(events deliver: @escaping @Sendable (BackplaneEvent) async -> Void) async throws {
        let client = self.client, leaseClient = self.leaseClient
        let running = Task { await client.run() }
        let leaseRunning = Task { await leaseClient.run() }
        tasks.withLockedValue { $0.append(contentsOf: [running, leaseRunning]) }
        try await PostgresSchema.migrate(client, logger: logger)
        let (started, didStart) = AsyncStream<Void>.makeStream()
        let follower = self.follower, logger = self.logger, writer = self.writer
        let following = Task {
            do {
                try await follower.run(started: { didStart.finish() }) { event in
                    switch event {
                    case .messages(let entries): await deliver(.messages(entries.map(Self.message)))
                    case .gaps(let gaps): await deliver(.gaps(gaps.map(Self.gap)))
                    case .started(let start): await deliver(.positions(Self.positions(start)))
                    case .newTimeline(let firstEpoch): await deliver(.positions(BackplanePositions(channels: [], firstEpoch: firstEpoch)))
                    case .following(let starts): await deliver(.following(starts.map(Self.start)))
                    case .link(let up):
                        if !up { await writer.abandonInFlight() }   // refused now, not when the pool gives up
                        await deliver(.link(up: up))
                    }
                }
            } catch {
                if !Task.isCancelled { logger.error("following the channel log stopped", metadata: ["error": "\(error)"]) }
            }
            didStart.finish()
        }
        let registry = self.registry, retention = self.retention
        try await registry.register(newRun: true)   // a new run: before anything is committed
        let leasing = Task { await registry.run(events: deliver) }
        let trimming = Task { await retention.run() }
        tasks.withLockedValue { $0.insert(contentsOf: [following, leasing, trimming], at: 0) }   // stopped before the client
        for await _ in started {}
        logger.info("cluster backplane started", metadata: ["node": "\(node)"])
    }

    /// `PostgresBackplaneOptions.callTimeout`: a publish is answered within it of its arrival.
    public let publishDeadline: TimeAmount

    public func publish(_ messages: [BackplanePublish]) async throws -> [BackplaneReceipt] {
        // Nothing is committed by a node the others may have declared dead (it was paused, or
        // could not renew): it asks first (`NodeRegistry.ensureLease`, free while the lease runs).
        try await registry.ensureLease()
        return try await writer.append(messages).map { BackplaneReceipt(seq: UInt64($0.seq), epoch: $0.epoch, resent: $0.resent) }
    }

    public func follow(_ channels: [BackplaneFollow]) async throws {
        try await follower.follow(channels.map { follow in
            ChannelLogFollow(key: ChannelLogKey(appId: follow.appId, channel: follow.channel), generation: follow.generation,
                             after: follow.after.map { ($0.epoch, Int64($0.seq)) }, replayMax: follow.replayMax)
        })
    }

    public func unfollow(_ channels: [BackplaneFollow]) {
        follower.unfollow(Dictionary(channels.map { (ChannelLogKey(appId: $0.appId, channel: $0.channel), $0.generation) }) { max($0, $1) })
    }

    public func advertise(address: String) {
        registry.advertise(address)
    }

    public func reachesDatabase(within timeout: TimeAmount) async -> Bool {
        await registry.reachesDatabase(within: timeout)
    }

    public func controlHistory(channel: String, sinceMillis: Int64) async throws -> [BackplaneMessage] {
        try await log.recent(appId: "", channel: channel, sinceMillis: sinceMillis).map(Self.message)
    }

    public func stop() async {
        let tasks = self.tasks.withLockedValue { tasks in defer { tasks = [] }; return tasks }
        for task in tasks {
            task.cancel()
            await task.value
        }
    }

    private static func positions(_ start: ChannelLogStart) -> BackplanePositions {
        let channels = start.applied.compactMap { key, seq in
            start.epochs[key].map { BackplanePositions.Channel(appId: key.appId, channel: key.channel, epoch: $0.epoch, seq: UInt64(seq)) }
        }
        return BackplanePositions(channels: channels, firstEpoch: ChannelLogStart.firstEpoch(cluster: start.cluster, timeline: start.timeline),
                                  recentIds: start.recentIds.map {
                                      BackplanePositions.RecentId(appId: $0.appId, publisher: $0.publisher, msgId: $0.msgId, seq: UInt64($0.seq))
                                  })
    }

    private static func start(_ start: ChannelLogFollowStart) -> BackplaneFollowStart {
        BackplaneFollowStart(appId: start.key.appId, channel: start.key.channel, epoch: start.epoch, seq: UInt64(start.seq),
                             recent: start.recent.map(Self.message))
    }

    private static func gap(_ gap: ChannelLogOrdering.Gap) -> BackplaneGap {
        BackplaneGap(appId: gap.key.appId, channel: gap.key.channel, epoch: gap.epoch, from: UInt64(gap.from), to: UInt64(gap.to))
    }

    private static func message(_ entry: ChannelLogEntry) -> BackplaneMessage {
        BackplaneMessage(appId: entry.appId, channel: entry.channel, seq: UInt64(entry.seq), epoch: entry.epoch, publisher: entry.publisher,
                         customType: entry.customType, isText: entry.isText, payload: entry.payload, millis: entry.millis, node: entry.node,
                         msgId: entry.msgId)
    }
}
