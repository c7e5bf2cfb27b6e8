import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// Follows the channel log for one node: every message committed by any node, exactly once, in
/// each channel's order (`ChannelLogOrdering`), handed to `deliver` in batches.
///
/// It reads when woken by `NOTIFY rtm_log` on its own dedicated connection, every
/// `pollInterval` whatever happens (notifications are only a wake-up: one can be lost with a
/// connection), and after every reconnection of the listening connection (the catch-up read).
/// A catch-up never delivers twice: rows at or below a channel's delivered number are dropped.
public final class ChannelLogFollower: Sendable {
    /// What the follower reports besides messages.
    public enum Event: Sendable {
        /// Messages to deliver, in order per channel.
        case messages([ChannelLogEntry])
        /// Numbers given up on after the hold-back window (M-2: subscribers are told `gap`).
        case gaps([ChannelLogOrdering.Gap])
        /// The database link came up (`true`) or went down (`false`).
        case link(up: Bool)
    }

    private let log: PostgresChannelLog
    private let location: PostgresLocation
    private let pollInterval: TimeAmount
    private let holdbackMillis: Int64
    private let retryInterval: TimeAmount
    private let logger: Logger

    /// - Parameters:
    ///   - pollInterval: the fallback read interval (default 100 ms).
    ///   - holdback: how long a missing number is waited for before it is a gap (default 5 s).
    ///   - retryInterval: the wait between attempts to reach the database (default 1 s).
    public init(log: PostgresChannelLog, location: PostgresLocation, pollInterval: TimeAmount = .milliseconds(100),
                holdback: TimeAmount = .seconds(5), retryInterval: TimeAmount = .seconds(1), logger: Logger) {
        self.log = log
        self.location = location
        self.pollInterval = pollInterval
        self.holdbackMillis = holdback.nanoseconds / 1_000_000
        self.retryInterval = retryInterval
        self.logger = logger
    }

    /// Follows the log from now on until the task is cancelled, calling `deliver` for each
    /// event, one at a time. `started` is called once the starting position is read: every
    /// message committed after that call is delivered.
    public func run(started: @escaping @Sendable () -> Void = {}, deliver: @escaping @Sendable (Event) async -> Void) async throws {
        let (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen(wake: wake, deliver: deliver) }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(nanoseconds: UInt64(self.pollInterval.nanoseconds))
                    wake.yield()
                }
            }
            group.addTask { try await self.follow(wakes: wakes, started: started, deliver: deliver) }
            try await group.next()
            group.cancelAll()
        }
    }

    /// Reads whenever woken.
    private func follow(wakes: AsyncStream<Void>, started: @Sendable () -> Void, deliver: @Sendable (Event) async -> Void) async throws {
        var start: (cursor: ChannelLogCursor, applied: [ChannelLogKey: Int64])?
        while start == nil {
            do {
                start = try await log.startPosition()
            } catch {
                logger.warning("cannot reach the database to start following the channel log", metadata: ["error": "\(error)"])
                try await Task.sleep(nanoseconds: UInt64(retryInterval.nanoseconds))
            }
        }
        started()
        var cursor = start!.cursor
        var ordering = ChannelLogOrdering(applied: start!.applied, holdbackMillis: holdbackMillis)
        var failing = false
        for await _ in wakes {
            do {
                while true {
                    let (entries, next) = try await log.read(after: cursor)
                    cursor = next
                    let output = ordering.accept(entries, nowMillis: Self.nowMillis())
                    if !output.ready.isEmpty { await deliver(.messages(output.ready)) }
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
            let expired = ordering.expire(nowMillis: Self.nowMillis())
            if !expired.gaps.isEmpty { await deliver(.gaps(expired.gaps)) }
            if !expired.ready.isEmpty { await deliver(.messages(expired.ready)) }
        }
    }

    /// Keeps one connection listening; wakes the reader on every notification and after every
    /// (re)connection.
    private func listen(wake: AsyncStream<Void>.Continuation, deliver: @Sendable (Event) async -> Void) async {
        var id = 0
        // What the node was last told (nil: nothing yet). The first connection reports the link
        // up (a catch-up for what the node missed); a first attempt that fails reports it down:
        // the node assumes up at start (`ClusterStatus`), and a database lost before the
        // listener's first connection must not leave it saying so.
        var reported: Bool?
        while !Task.isCancelled {
            id += 1
            do {
                try await location.listen(on: PostgresChannelLog.notificationChannel, connectionID: id, logger: logger) { notifications in
                    if reported != true {
                        reported = true
                        await deliver(.link(up: true))
                    }
                    wake.yield()   // the catch-up read after a (re)connection
                    for try await _ in notifications { wake.yield() }
                }
            } catch {
                if reported != false {
                    logger.warning(reported == nil ? "cannot open the database's listening connection; polling until it is open"
                                   : "lost the database's listening connection; polling until it is back", metadata: ["error": "\(error)"])
                    reported = false
                    await deliver(.link(up: false))
                }
            }
            try? await Task.sleep(nanoseconds: UInt64(retryInterval.nanoseconds))
        }
    }

    private static func nowMillis() -> Int64 {
        Int64(NIODeadline.now().uptimeNanoseconds / 1_000_000)
    }
}
