import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

/// Follows the channel log for one node: every message committed by any node, exactly once, in
/// each channel's order (`ChannelLogOrdering`), handed to `deliver` in batches.
///
/// The `NOTIFY` of each commit (on the node's listening connection: on `rtm_log` for the
/// cluster's own channels, on a shard's channel for a data channel, `ChannelLogShards`)
/// carries the messages committed (`ChannelLogNotice`): they are delivered from it, without a
/// read. The follower
/// also reads the log whatever happens (a notification is only a shortcut: one can be lost
/// with a connection or a node): every `quietPollInterval` while its listening connection is
/// up and nothing is missing, every `pollInterval` while it is not (the connection down, a
/// number held for the one before it, a read failed); and after every reconnection of the
/// listening connection (the catch-up read), and on a notification without messages (a batch
/// too large to carry, a channel whose epoch this node does not know yet, a node of an earlier
/// release).
/// Nothing is delivered twice or out of order whichever way a message comes first:
/// `ChannelLogOrdering` drops numbers at or below a channel's delivered one and holds a number
/// until the one before it has come.
public final class ChannelLogFollower: Sendable {
    /// What the follower reports besides messages.
    public enum Event: Sendable {
        /// Messages to deliver, in order per channel.
        case messages([ChannelLogEntry])
        /// Numbers given up on after the hold-back window (M-2: subscribers are told `gap`).
        case gaps([ChannelLogOrdering.Gap])
        /// The database link came up (`true`) or went down (`false`).
        case link(up: Bool)
        /// Where every channel stood when following started (each channel's epoch and number,
        /// and the epoch a channel's first message gets): the first event, delivered before
        /// `started` is called.
        case started(ChannelLogStart)
        /// The database moved to a new timeline (a standby was promoted): a channel's first
        /// message, and every channel's next one, gets this epoch.
        case newTimeline(firstEpoch: String)
        /// Data channels followed from now on (`follow`): where each stands, before any of its
        /// messages.
        case following([ChannelLogFollowStart])
    }

    /// Which data channels the follower delivers.
    public enum Interest: Sendable {
        /// Every channel's messages (one follower that sees the whole log).
        case everyChannel
        /// Only the channels asked for with `follow` (a cluster node: the channels it has
        /// subscribers or replay buffers for), and always the cluster's own
        /// (`ChannelLogShards.isAlwaysFollowed`).
        case followed
    }

    /// A request from outside the follower's loop, taken at its next round.
    private enum Command {
        case follow([ChannelLogFollow], CheckedContinuation<Void, any Error>)
        case unfollow([ChannelLogKey: UInt64])
    }

    private struct Control {
        var wake: AsyncStream<Void>.Continuation?
        var commands: [Command] = []
        var stopped = false
    }

    private let log: PostgresChannelLog
    private let listener: PostgresListener
    private let interest: Interest
    private var followsEveryChannel: Bool { if case .everyChannel = interest { true } else { false } }
    private let control = NIOLockedValueBox(Control())
    private let readCount = NIOLockedValueBox(0)

    /// Reads of the log so far (a message announced by its node's notification needs none).
    public var reads: Int { readCount.withLockedValue { $0 } }
    private let pollInterval: TimeAmount
    private let quietPollInterval: TimeAmount
    private let holdbackMillis: Int64
    private let retryInterval: TimeAmount
    private let resendWindow: TimeAmount
    private let resendMemory: Int
    private let logger: Logger

    /// - Parameters:
    ///   - pollInterval: the read interval while notifications cannot be counted on (default
    ///     100 ms).
    ///   - quietPollInterval: the read interval while the listening connection is up and no
    ///     number is missing (nil: `pollInterval`). It bounds how late a message whose
    ///     notification never came (the database restarted between its commit and its
    ///     notifications; a node of an earlier release, which notifies after its commit, died in
    ///     between) is delivered when nothing comes after it in its channel.
    ///   - holdback: how long a missing number is waited for before it is a gap (default 5 s).
    ///   - retryInterval: the wait between attempts to reach the database (default 1 s).
    ///   - resendWindow, resendMemory: the message ids read back at the start (`ChannelLogStart.recentIds`).
    ///   - listener: the node's shared listening connection; nil: one of the follower's own.
    ///   - interest: every channel (default), or only those asked for with `follow`.
    public init(log: PostgresChannelLog, location: PostgresLocation, pollInterval: TimeAmount = .milliseconds(100),
                quietPollInterval: TimeAmount? = nil, holdback: TimeAmount = .seconds(5), retryInterval: TimeAmount = .seconds(1), resendWindow: TimeAmount = .zero,
                resendMemory: Int = 1024, listener: PostgresListener? = nil, interest: Interest = .everyChannel, logger: Logger) {
        self.listener = listener ?? PostgresListener(location: location)
        self.interest = interest
        self.resendWindow = resendWindow
        self.resendMemory = resendMemory
        self.log = log
        self.pollInterval = pollInterval
        self.quietPollInterval = max(quietPollInterval ?? pollInterval, pollInterval)
        self.holdbackMillis = holdback.nanoseconds / 1_000_000
        self.retryInterval = retryInterval
        self.logger = logger
    }

    /// Follows the log from now on until the task is cancelled, calling `deliver` for each
    /// event, one at a time. `started` is called once the starting position is read: every
    /// message committed after that call is delivered.
    public func run(started: @escaping @Sendable () -> Void = {}, deliver: @escaping @Sendable (Event) async -> Void) async throws {
        let (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let recheck = NIOLockedValueBox(false)   // the listening connection was (re)opened
        let pending = NIOLockedValueBox(Pending())
        let urgency = NIOLockedValueBox(Urgency())
        // A notification's messages (nil: a plain wake-up), from `rtm_log` or a shard.
        let announce: @Sendable ([ChannelLogEntry]?) -> Void = { entries in
            pending.withLockedValue { $0.announce(entries) }
            wake.yield()
        }
        let shards = ShardListens(listener: listener, retryInterval: retryInterval, logger: logger, announce: announce)
        control.withLockedValue { $0.wake = wake }
        defer {
            shards.stop()
            let left = control.withLockedValue { control in
                defer { control.commands = []; control.stopped = true; control.wake = nil }
                return control.commands
            }
            for case .follow(_, let continuation) in left { continuation.resume(throwing: CancellationError()) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen(wake: wake, announce: announce, recheck: recheck, urgency: urgency, deliver: deliver) }
            group.addTask {
                var quietFor: Int64 = 0
                while !Task.isCancelled {
                    try await Task.sleep(nanoseconds: UInt64(self.pollInterval.nanoseconds))
                    quietFor += self.pollInterval.nanoseconds
                    guard quietFor >= self.quietPollInterval.nanoseconds || urgency.withLockedValue({ $0.urgent }) else { continue }
                    quietFor = 0
                    pending.withLockedValue { $0.read = true }
                    wake.yield()
                }
            }
            group.addTask {
                try await self.follow(wakes: wakes, pending: pending, recheck: recheck, urgency: urgency, shards: shards, started: started,
                                      deliver: deliver)
            }
            try await group.next()
            group.cancelAll()
        }
    }

    /// Reads whenever woken.
    ///
    /// **Failover.** When the database moves to a new timeline (a standby promoted), the new
    /// primary gives out again the transaction ids of the old primary's lost tail, so rows of
    /// the new history can sit below the cursor. The follower checks the timeline after every
    /// failed read and listening reconnection, and sees it in the rows it reads; on a change it
    /// moves the cursor back to the last row of the history it followed
    /// (`PostgresChannelLog.rewind`) and reads from there. The channels' new epochs reach the
    /// subscribers as gaps of unknown size (`ChannelLogOrdering`).
    private func follow(wakes: AsyncStream<Void>, pending: NIOLockedValueBox<Pending>, recheck: NIOLockedValueBox<Bool>,
                        urgency: NIOLockedValueBox<Urgency>, shards: ShardListens, started: @Sendable () -> Void,
                        deliver: @Sendable (Event) async -> Void) async throws {
        // Following every channel: it listens on every shard.
        let all = Set(0..<ChannelLogShards.count)
        if followsEveryChannel { shards.set(all) }
        var start: ChannelLogStart?
        while start == nil {
            do {
                start = try await log.startPosition(resendWindow: resendWindow, resendMemory: resendMemory)
            } catch {
                logger.warning("cannot reach the database to start following the channel log", metadata: ["error": "\(error)"])
                try await Task.sleep(nanoseconds: UInt64(retryInterval.nanoseconds))
            }
        }
        await deliver(.started(start!))
        started()
        if followsEveryChannel {
            // What was announced before the shards listened is read once they do.
            await shards.waitListening(all, timeout: .seconds(1))
            pending.withLockedValue { $0.read = true }
            control.withLockedValue { $0.wake }?.yield()
        }
        var cursor = start!.cursor
        var timeline = start!.timeline
        let cluster = start!.cluster
        // A move to a new timeline is announced with the epoch new channels then get.
        func followTimeline(_ timeline: inout String, _ cursor: inout ChannelLogCursor, _ seen: String?) async throws {
            guard try await checkTimeline(&timeline, cursor: &cursor, seen: seen) else { return }
            await deliver(.newTimeline(firstEpoch: ChannelLogStart.firstEpoch(cluster: cluster, timeline: timeline)))
        }
        var ordering = ChannelLogOrdering(applied: start!.applied, epochs: start!.epochs, holdbackMillis: holdbackMillis)
        // The data channels followed (`Interest.followed`), with the generation of their follow.
        var followed: [ChannelLogKey: UInt64] = [:]
        let everyChannel = followsEveryChannel
        func isFollowed(_ key: ChannelLogKey) -> Bool { everyChannel || followed[key] != nil || ChannelLogShards.isAlwaysFollowed(key) }
        var failing = false
        for await _ in wakes {
            // After every round, whichever way it ends: whether the polls must be quick.
            defer {
                let (holding, failed) = (ordering.heldCount > 0, failing)
                urgency.withLockedValue { $0.holding = holding; $0.failing = failed }
            }
            // Follows and stops asked for since the last round, before anything is delivered.
            let commands = control.withLockedValue { control in defer { control.commands = [] }; return control.commands }
            for command in commands {
                switch command {
                case .follow(let follows, let continuation):
                    do {
                        let starts = try await self.start(follows, followed: &followed, ordering: &ordering, shards: shards,
                                                          timeline: timeline, cluster: cluster, listening: urgency.withLockedValue { $0.listening })
                        await deliver(.following(starts))
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                case .unfollow(let keys):
                    for (key, generation) in keys where followed[key] == generation {
                        followed[key] = nil
                        ordering.forget(key)
                    }
                    shards.set(Self.shards(of: followed))
                }
            }
            var (announced, read) = pending.withLockedValue { pending in defer { pending = Pending() }; return (pending.entries, pending.read) }
            if !everyChannel { announced.removeAll { !isFollowed(ChannelLogKey(appId: $0.appId, channel: $0.channel)) } }
            if !announced.isEmpty {
                // Only channels whose epoch is known and the same: anything else (a channel's
                // first message, a new epoch after a failover) is read, with its timeline.
                let known = announced.filter { ordering.epochs[ChannelLogKey(appId: $0.appId, channel: $0.channel)]?.epoch == $0.epoch }
                if known.count < announced.count { read = true }
                await self.deliver(ordering.accept(known, nowMillis: Self.nowMillis()), to: deliver)
            }
            let reconnected = recheck.withLockedValue({ flag in defer { flag = false }; return flag })
            guard read || failing || reconnected else {
                await self.deliver(ordering.expire(nowMillis: Self.nowMillis()), to: deliver)
                continue
            }
            do {
                if failing || reconnected {
                    try await followTimeline(&timeline, &cursor, nil)
                }
                while true {
                    readCount.withLockedValue { $0 += 1 }
                    let (entries, next) = try await log.read(after: cursor, following: everyChannel ? nil : Set(followed.keys))
                    if let newer = entries.lazy.compactMap(\.timeline).first(where: { $0 > timeline }) {
                        try await followTimeline(&timeline, &cursor, newer)
                        continue
                    }
                    cursor = next
                    let output = ordering.accept(entries, nowMillis: Self.nowMillis())
                    await self.deliver(output, to: deliver)
                    if entries.count < 5_000 { break }
                }
                if failing {
                    failing = false
                    logger.info("reading the channel log again")
                }
            } catch {
                if Task.isCancelled { return }   // stopping: not a failure to report
                if !failing {
                    failing = true
                    logger.warning("reading the channel log failed; retrying", metadata: ["error": "\(error)"])
                }
            }
            await self.deliver(ordering.expire(nowMillis: Self.nowMillis()), to: deliver)
        }
    }

    /// Starts following `follows` (`Interest.followed`): from the next round on, their rows are
    /// read and their shards' notifications taken; returns once the follower has delivered
    /// where each stands (`Event.following`), so that a subscribe waiting for it answers with
    /// the cluster's position and misses nothing after it. A channel followed already keeps its
    /// place (no read). Throws when the database cannot be read (the channels are not followed).
    public func follow(_ follows: [ChannelLogFollow]) async throws {
        guard !follows.isEmpty else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let wake: AsyncStream<Void>.Continuation?? = control.withLockedValue { control in
                guard !control.stopped else { return .none }
                control.commands.append(.follow(follows, continuation))
                return .some(control.wake)
            }
            guard let wake else { return continuation.resume(throwing: CancellationError()) }
            wake?.yield()
        }
    }

    /// Stops following `keys` (each with the generation of the follow it ends: a stop for an
    /// earlier follow of a channel followed again since does nothing).
    public func unfollow(_ keys: [ChannelLogKey: UInt64]) {
        guard !keys.isEmpty else { return }
        let wake = control.withLockedValue { control -> AsyncStream<Void>.Continuation? in
            guard !control.stopped else { return nil }
            control.commands.append(.unfollow(keys))
            return control.wake
        }
        wake?.yield()
    }

    /// The follows' start: each new channel's shard listened on (waited for, up to a second,
    /// while the listening connection is up, so that every message committed after the
    /// position below is announced to this node), then its position read as committed now,
    /// and the messages a resuming subscriber missed.
    private func start(_ follows: [ChannelLogFollow], followed: inout [ChannelLogKey: UInt64], ordering: inout ChannelLogOrdering,
                       shards: ShardListens, timeline: String, cluster: String, listening: Bool) async throws -> [ChannelLogFollowStart] {
        var starts: [ChannelLogFollowStart] = []
        var fresh: [ChannelLogFollow] = []
        for follow in follows {
            let always = followsEveryChannel || ChannelLogShards.isAlwaysFollowed(follow.key)
            if followed[follow.key] != nil || always {
                if !always { followed[follow.key] = max(followed[follow.key] ?? 0, follow.generation) }
                let epoch = ordering.epochs[follow.key]?.epoch ?? ChannelLogStart.firstEpoch(cluster: cluster, timeline: timeline)
                starts.append(ChannelLogFollowStart(key: follow.key, epoch: epoch, seq: ordering.applied[follow.key] ?? 0))
            } else if !fresh.contains(where: { $0.key == follow.key }) {
                fresh.append(follow)
            }
        }
        guard !fresh.isEmpty else { return starts }
        let before = followed
        for follow in fresh { followed[follow.key] = follow.generation }
        let wanted = Self.shards(of: followed)
        let new = wanted.subtracting(shards.shards)
        shards.set(wanted)
        do {
            if listening, !new.isEmpty { await shards.waitListening(new, timeout: .seconds(1)) }
            let positions = try await log.positions(of: fresh.map(\.key))
            for follow in fresh {
                let (seq, epoch) = positions[follow.key]
                    ?? (0, ChannelLogOrdering.Epoch(epoch: ChannelLogStart.firstEpoch(cluster: cluster, timeline: timeline), timeline: timeline))
                var recent: [ChannelLogEntry] = []
                if let after = follow.after, after.epoch == epoch.epoch, after.seq < seq, follow.replayMax > 0 {
                    let from = max(after.seq, seq - Int64(follow.replayMax))
                    recent = try await log.messages(appId: follow.key.appId, channel: follow.key.channel, after: from, limit: Int(seq - from))
                        .filter { $0.epoch == epoch.epoch && $0.seq <= seq }
                }
                ordering.start(follow.key, epoch: epoch, seq: seq)
                starts.append(ChannelLogFollowStart(key: follow.key, epoch: epoch.epoch, seq: seq, recent: recent))
            }
        } catch {
            for follow in fresh where before[follow.key] == nil { followed[follow.key] = nil }
            shards.set(Self.shards(of: followed))
            throw error
        }
        return starts
    }

    /// The shards the followed channels' notifications come on.
    private static func shards(of followed: [ChannelLogKey: UInt64]) -> Set<Int> {
        Set(followed.keys.lazy.map(ChannelLogShards.shard(of:)))
    }

    /// Moves the cursor back when the database's timeline is not the one followed; returns
    /// whether it did. `seen`: a later timeline read in the log's rows.
    private func checkTimeline(_ timeline: inout String, cursor: inout ChannelLogCursor, seen: String?) async throws -> Bool {
        let current = max(try await log.timeline(), seen ?? "")
        guard current != timeline else { return false }
        let rewound = try await log.rewind(cursor, timeline: timeline)
        logger.warning("the database moved to a new timeline (a standby was promoted): reading the log again from the old history's last row; channels start new epochs",
                       metadata: ["from": "\(timeline)", "to": "\(current)", "cursor": "\(cursor)", "rewound": "\(rewound)"])
        timeline = current
        cursor = rewound
        return true
    }

    /// Hands an output on, in order: runs of messages and runs of gaps.
    private func deliver(_ output: ChannelLogOrdering.Output, to deliver: @Sendable (Event) async -> Void) async {
        var messages: [ChannelLogEntry] = []
        var gaps: [ChannelLogOrdering.Gap] = []
        for item in output.items {
            switch item {
            case .message(let entry):
                if !gaps.isEmpty { await deliver(.gaps(gaps)); gaps = [] }
                messages.append(entry)
            case .gap(let gap):
                if !messages.isEmpty { await deliver(.messages(messages)); messages = [] }
                gaps.append(gap)
            }
        }
        if !gaps.isEmpty { await deliver(.gaps(gaps)) }
        if !messages.isEmpty { await deliver(.messages(messages)) }
    }

    /// Keeps one connection listening; wakes the reader on every notification and after every
    /// (re)connection.
    private func listen(wake: AsyncStream<Void>.Continuation, announce: @Sendable ([ChannelLogEntry]?) -> Void, recheck: NIOLockedValueBox<Bool>,
                        urgency: NIOLockedValueBox<Urgency>, deliver: @Sendable (Event) async -> Void) async {
        // What the node was last told (nil: nothing yet). The first connection reports the link
        // up (a catch-up for what the node missed); a first attempt that fails reports it down:
        // the node assumes up at start (`ClusterStatus`), and a database lost before the
        // listener's first connection must not leave it saying so.
        var reported: Bool?
        while !Task.isCancelled {
            do {
                try await listener.listen(on: PostgresChannelLog.notificationChannel, logger: logger) { notifications in
                    if reported != true {
                        reported = true
                        await deliver(.link(up: true))
                    }
                    recheck.withLockedValue { $0 = true }   // it may be another server now (a failover)
                    urgency.withLockedValue { $0.listening = true }
                    wake.yield()   // the catch-up read after a (re)connection
                    for try await notification in notifications { announce(ChannelLogNotice.decode(notification.payload)) }
                }
                // The notifications ended without an error: the connection closed all the same.
                throw PostgresChannelLogError("the listening connection closed")
            } catch {
                urgency.withLockedValue { $0.listening = false }
                if reported != false && !Task.isCancelled {
                    logger.warning(reported == nil ? "cannot open the database's listening connection; polling until it is open"
                                   : "lost the database's listening connection; polling until it is back", metadata: ["error": "\(error)"])
                    reported = false
                    await deliver(.link(up: false))
                }
            }
            try? await Task.sleep(nanoseconds: UInt64(retryInterval.nanoseconds))
        }
    }

    /// Whether the follower reads at `pollInterval` (urgent) or at `quietPollInterval`.
    struct Urgency {
        /// The listening connection is up: notifications come.
        var listening = false
        /// A number is held, waiting for the one before it (its notification may be lost).
        var holding = false
        /// The last read failed.
        var failing = false

        var urgent: Bool { !listening || holding || failing }
    }

    /// What woke the follower since it last looked: messages announced, and whether to read.
    struct Pending {
        /// The most announced messages kept while the follower's loop is busy; past it they are
        /// dropped and the log is read instead (it has them all), so memory stays bounded
        /// however long delivery stalls.
        static let maxEntries = 10_000

        private(set) var entries: [ChannelLogEntry] = []
        var read = false

        /// A notification's messages, or nil: a plain wake-up (read the log).
        mutating func announce(_ announced: [ChannelLogEntry]?) {
            guard let announced else {
                read = true
                return
            }
            guard entries.count + announced.count <= Self.maxEntries else {
                entries = []
                read = true
                return
            }
            entries.append(contentsOf: announced)
        }
    }

    private static func nowMillis() -> Int64 {
        Int64(NIODeadline.now().uptimeNanoseconds / 1_000_000)
    }
}
