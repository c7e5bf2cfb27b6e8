import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Trims the channel log: every `interval`, one node of the cluster deletes
/// the messages older than `retention`. The nodes take turns through `rtm_maintenance`'s last
/// run (claimed under a non-blocking advisory lock), so the log is trimmed once per period
/// however many nodes there are. Followers are unaffected: they read only new rows.
public final class ChannelLogRetention: Sendable {
    private static let lockKey: Int64 = 7_236_815_002
    private let client: PostgresClient
    private let retention: TimeAmount
    private let interval: TimeAmount
    private let logger: Logger

    public init(client: PostgresClient, retention: TimeAmount, interval: TimeAmount, logger: Logger) {
        self.client = client
        self.retention = retention
        self.interval = interval
        self.logger = logger
    }

    /// Trims if this period's trim is still to do and no other node is at it: the rows deleted,
    /// or nil when it was not this node's turn.
    public func trimIfDue(nowMillis: Int64) async throws -> Int? {
        // Bounded by the period (`BoundedCall`): a trim stuck on a dead connection is given up
        // and tried again in a later period.
        try await BoundedCall.run("the log trim", timeout: interval) { [self] in try await trim(nowMillis: nowMillis) }
    }

    private func trim(nowMillis: Int64) async throws -> Int? {
        let cutoff = nowMillis - retention.nanoseconds / 1_000_000
        let periodMillis = interval.nanoseconds / 1_000_000
        return try await client.transaction(Trim(cutoff: cutoff, periodMillis: periodMillis), logger: logger)
    }

    /// One trim (`trim`): only by the node that takes the trim lock, once per period.
    private struct Trim: PostgresTransaction {
        let cutoff: Int64
        let periodMillis: Int64

        func run(on connection: PostgresConnection, logger: Logger) async throws -> Int? {
            var locked = false
            for try await got in try await connection.query("SELECT pg_try_advisory_xact_lock(\(ChannelLogRetention.lockKey))", logger: logger)
                .decode(Bool.self) { locked = got }
            guard locked else { return nil }
            var claimed = false
            for try await _ in try await connection.query("""
                UPDATE rtm_maintenance SET last_run = now()
                WHERE task = 'trim_channel_log' AND last_run <= now() - \(periodMillis)::int8 * interval '1 millisecond'
                RETURNING task
                """, logger: logger).decode(String.self) { claimed = true }
            guard claimed else { return nil }
            var count = 0
            for try await deleted in try await connection.query("""
                WITH d AS (DELETE FROM rtm_channel_log WHERE ts < \(cutoff) RETURNING 1) SELECT count(*)::int8 FROM d
                """, logger: logger).decode(Int64.self) { count = Int(deleted) }
            return count
        }
    }

    /// Trims when due, every `interval` (first after one interval), until cancelled.
    public func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(nanoseconds: UInt64(interval.nanoseconds))
            guard !Task.isCancelled else { return }
            do {
                if let count = try await trimIfDue(nowMillis: Int64(Date().timeIntervalSince1970 * 1000)), count > 0 {
                    logger.info("channel log trimmed", metadata: ["deleted": "\(count)"])
                }
            } catch {
                logger.debug("trimming the channel log failed (next period)", metadata: ["error": "\(error)"])
            }
        }
    }
}
