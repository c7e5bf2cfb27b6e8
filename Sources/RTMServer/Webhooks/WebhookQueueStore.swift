import Foundation
import GRDB

/// The webhook queue on disk (`webhooks.sqlite` in the data directory; in memory without
/// one): events wait here from their emission until a 2xx answer, so a restart delivers what
/// was queued. Bounded: past `maxEvents` the oldest rows go. It also keeps who the events say
/// is online and in which channels (`webhook_presence`, changed in the same transaction as the
/// events), so that the sessions a server run leaves behind end with their events in the next
/// run. Used only from the dispatcher's queue (hence `@unchecked Sendable`).
final class WebhookQueueStore: @unchecked Sendable {
    private let db: DatabaseQueue
    private let maxEvents: Int
    /// Rows in the table (loaded once, then kept up to date).
    private(set) var count: Int

    init(path: String?, maxEvents: Int, fullSync: Bool = false) throws {
        db = try SQLiteFile.open(path: path, fullSync: fullSync)
        self.maxEvents = max(1, maxEvents)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-webhook-queue") { db in
            try db.execute(sql: """
                CREATE TABLE webhook_event (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    ordering_key TEXT NOT NULL, event_id TEXT NOT NULL, body BLOB NOT NULL);
                """)
        }
        migrator.registerMigration("v2-webhook-presence") { db in
            // channel '' and channel_type '': the user is online.
            try db.execute(sql: """
                CREATE TABLE webhook_presence (
                    app TEXT NOT NULL, user TEXT NOT NULL, channel TEXT NOT NULL, channel_type TEXT NOT NULL,
                    PRIMARY KEY (app, user, channel, channel_type));
                """)
        }
        try migrator.migrate(db)
        count = try db.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM webhook_event") } ?? 0
    }

    /// Every queued event, oldest first (after a restart).
    func all() throws -> [WebhookScheduler.Item] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT id, ordering_key, event_id, body FROM webhook_event ORDER BY id").map {
                WebhookScheduler.Item(id: $0["id"], key: $0["ordering_key"], eventId: $0["event_id"], body: $0["body"])
            }
        }
    }

    /// The time (`ts`, ms) of the oldest queued event, nil when none is queued.
    func oldestEventMillis() throws -> Int64? {
        struct Stamp: Decodable { let ts: Int64 }
        guard let body = try db.read({ db in try Data.fetchOne(db, sql: "SELECT body FROM webhook_event ORDER BY id LIMIT 1") }) else {
            return nil
        }
        return try? JSONDecoder().decode(Stamp.self, from: body).ts
    }

    /// Appends events in one transaction; when the table then holds more than the bound, the
    /// oldest rows go. Returns the new items (with their ids) and the ids dropped.
    /// `presence` are the events' changes of who is online where, applied in the same transaction.
    func append(_ events: [(key: String, eventId: String, body: Data)],
                presence: [WebhookEvent] = []) throws -> (items: [WebhookScheduler.Item], dropped: [Int64]) {
        let maxEvents = self.maxEvents
        let result = try db.write { db -> ([WebhookScheduler.Item], [Int64]) in
            for event in presence { try Self.apply(event, db) }
            var items: [WebhookScheduler.Item] = []
            let insert = try db.cachedStatement(sql: "INSERT INTO webhook_event(ordering_key, event_id, body) VALUES (?, ?, ?)")
            for event in events {
                try insert.execute(arguments: [event.key, event.eventId, event.body])
                items.append(.init(id: db.lastInsertedRowID, key: event.key, eventId: event.eventId, body: event.body))
            }
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM webhook_event") ?? 0
            var dropped: [Int64] = []
            if total > maxEvents {
                dropped = try Int64.fetchAll(db, sql: "SELECT id FROM webhook_event ORDER BY id LIMIT ?", arguments: [total - maxEvents])
                try db.execute(sql: "DELETE FROM webhook_event WHERE id <= ?", arguments: [dropped.last ?? 0])
            }
            return (items, dropped)
        }
        count = min(count + events.count, maxEvents)
        return result
    }

    /// Who the events written so far say is online, and in which channels: by user, its
    /// channels (name and type) in name order.
    func presence() throws -> [(user: UserKey, channels: [(name: String, type: String)])] {
        try db.read { db in
            var byUser: [UserKey: [(name: String, type: String)]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT app, user, channel, channel_type FROM webhook_presence ORDER BY app, user, channel") {
                let key = UserKey(appId: row["app"], userId: row["user"])
                let channel: String = row["channel"]
                if channel.isEmpty { byUser[key, default: []] += [] } else { byUser[key, default: []].append((channel, row["channel_type"])) }
            }
            return byUser.sorted { ($0.key.appId, $0.key.userId) < ($1.key.appId, $1.key.userId) }.map { ($0.key, $0.value) }
        }
    }

    private static func apply(_ event: WebhookEvent, _ db: Database) throws {
        switch event.eventType {
        case .userOnline:
            try db.execute(sql: "INSERT OR IGNORE INTO webhook_presence VALUES (?, ?, '', '')", arguments: [event.appId, event.userId])
        case .userOffline:
            try db.execute(sql: "DELETE FROM webhook_presence WHERE app = ? AND user = ?", arguments: [event.appId, event.userId])
        case .joinChannel:
            try db.execute(sql: "INSERT OR IGNORE INTO webhook_presence VALUES (?, ?, ?, ?)",
                           arguments: [event.appId, event.userId, event.channelName ?? "", event.channelType ?? ""])
        case .leaveChannel:
            try db.execute(sql: "DELETE FROM webhook_presence WHERE app = ? AND user = ? AND channel = ? AND channel_type = ?",
                           arguments: [event.appId, event.userId, event.channelName ?? "", event.channelType ?? ""])
        case .userMessageUndeliverable:
            break
        }
    }

    /// Removes delivered (or expired) events.
    func delete(_ ids: [Int64]) throws {
        guard !ids.isEmpty else { return }
        let removed = try db.write { db -> Int in
            let statement = try db.cachedStatement(sql: "DELETE FROM webhook_event WHERE id = ?")
            var removed = 0
            for id in ids {
                try statement.execute(arguments: [id])
                removed += db.changesCount
            }
            return removed
        }
        count -= removed
    }
}
