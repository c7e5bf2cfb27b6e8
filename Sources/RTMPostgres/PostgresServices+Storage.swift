import Foundation
import Logging
import NIOCore
import PostgresNIO
import RTMProtocol
import RTMServer

/// Metadata and history (`SharedServiceStore`): synchronous calls from RTMServer's storage
/// queue, each blocking it for one transaction.
extension PostgresServices {
    public func loadMetadata(_ key: StorageKey) throws -> Metadata? {
        let client = self.client, logger = self.logger
        return try blockingCall(timeout: callTimeout) {
            try await Self.metadata(key, on: client.query(Self.selectMetadata(key), logger: logger))
        }
    }

    public func saveMetadata(_ key: StorageKey, _ metadata: Metadata) throws {
        _ = try modifyMetadata(key, requiredLock: nil) { _ in metadata }
    }

    public func modifyMetadata(_ key: StorageKey, requiredLock: MetadataLockGuard?,
                               _ change: @escaping @Sendable (Metadata?) throws -> Metadata) throws -> Metadata {
        let client = self.client, logger = self.logger
        let outcome: Result<Metadata, any Error> = try blockingCall(timeout: callTimeout) {
            try await client.transaction(ModifyMetadata(key: key, requiredLock: requiredLock, change: change), logger: logger)
        }
        return try outcome.get()
    }

    /// One metadata write (`modifyMetadata`): `change` applied to the stored set under the set's
    /// advisory lock; a refusal (lock not held, `change` throws) writes nothing.
    private struct ModifyMetadata: PostgresTransaction {
        let key: StorageKey
        let requiredLock: MetadataLockGuard?
        let change: @Sendable (Metadata?) throws -> Metadata

        func run(on connection: PostgresConnection, logger: Logger) async throws -> Result<Metadata, any Error> {
            // One writer of this set at a time, on every node (released at commit): §2.11 CAS.
            let name = "\(key.appId)\n\(key.type.rawValue)\n\(key.target)"
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(name), 11))", logger: logger)
            if let requiredLock {
                var owner: String?
                for try await value in try await connection.query("""
                    SELECT owner FROM rtm_lock WHERE app = \(key.appId) AND channel = \(key.target) AND name = \(requiredLock.lockName)
                    FOR SHARE
                    """, logger: logger).decode(String?.self) { owner = value }
                guard owner == requiredLock.owner else {
                    return .failure(requiredLock.notHeld)
                }
            }
            let current = try await PostgresServices.metadata(key, on: connection.query(PostgresServices.selectMetadata(key), logger: logger))
            let next: Metadata
            do { next = try change(current) } catch { return .failure(error) }   // refused: nothing written
            let body = String(decoding: try JSONEncoder().encode(next), as: UTF8.self)
            try await connection.query("""
                INSERT INTO rtm_metadata (app, type, target, major_revision, body)
                VALUES (\(key.appId), \(key.type.rawValue), \(key.target), \(next.majorRevision), \(body))
                ON CONFLICT (app, type, target) DO UPDATE SET major_revision = EXCLUDED.major_revision, body = EXCLUDED.body
                """, logger: logger)
            return .success(next)
        }
    }

    private static func selectMetadata(_ key: StorageKey) -> PostgresQuery {
        "SELECT body FROM rtm_metadata WHERE app = \(key.appId) AND type = \(key.type.rawValue) AND target = \(key.target)"
    }

    private static func metadata(_ key: StorageKey, on rows: PostgresRowSequence) async throws -> Metadata? {
        var metadata: Metadata?
        for try await body in rows.decode(String.self) { metadata = try JSONDecoder().decode(Metadata.self, from: Data(body.utf8)) }
        return metadata
    }

    public func appendHistory(_ record: HistoryRecord) throws -> Int64? {
        let client = self.client, logger = self.logger
        return try blockingCall(timeout: callTimeout) {
            try await client.transaction(AppendHistory(record: record), logger: logger)
        }
    }

    /// One history append (`appendHistory`): its timestamp, nil when its dedup key was stored already.
    private struct AppendHistory: PostgresTransaction {
        let record: HistoryRecord

        func run(on connection: PostgresConnection, logger: Logger) async throws -> Int64? {
            let message = record.message
            // Appenders of one channel one at a time, so that timestamps stay unique (the cursor).
            let name = "\(record.appId)\n\(record.channelType)\n\(record.channel)"
            try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(name), 12))", logger: logger)
            var inserted: Int64?
            for try await ts in try await connection.query("""
                INSERT INTO rtm_history (app, channel_type, channel, ts, publisher, text, data, custom_type, dedup)
                SELECT \(record.appId), \(record.channelType), \(record.channel),
                       greatest(\(message.ts), coalesce(max(ts), 0) + 1), \(message.publisher), \(message.text),
                       \(message.data.map { ByteBuffer(bytes: $0) }), \(message.customType), \(record.dedupKey)
                FROM rtm_history WHERE app = \(record.appId) AND channel_type = \(record.channelType) AND channel = \(record.channel)
                ON CONFLICT DO NOTHING
                RETURNING ts
                """, logger: logger).decode(Int64.self) { inserted = ts }
            return inserted
        }
    }

    public func history(appId: String, channelType: String, channel: String, start: Int64, end: Int64, limit: Int) throws -> [HistoryMessage] {
        let client = self.client, logger = self.logger
        return try blockingCall(timeout: callTimeout) {
            var messages: [HistoryMessage] = []
            for try await (publisher, text, data, customType, ts) in try await client.query("""
                SELECT publisher, text, data, custom_type, ts FROM rtm_history
                WHERE app = \(appId) AND channel_type = \(channelType) AND channel = \(channel) AND ts < \(start) AND ts >= \(end)
                ORDER BY ts DESC LIMIT \(Int64(limit))
                """, logger: logger).decode((String, String?, ByteBuffer?, String?, Int64).self) {
                messages.append(HistoryMessage(publisher: publisher, text: text, data: data.map { Data($0.readableBytesView) },
                                               customType: customType, ts: ts))
            }
            return messages
        }
    }

    public func trimHistory(olderThan millis: Int64) throws -> Int {
        let client = self.client, logger = self.logger
        return try blockingCall(timeout: callTimeout) {
            var removed = 0
            for try await count in try await client.query("""
                WITH d AS (DELETE FROM rtm_history WHERE ts < \(millis) RETURNING 1) SELECT count(*) FROM d
                """, logger: logger).decode(Int64.self) { removed = Int(count) }
            return removed
        }
    }
}
