import Foundation
import GRDB

/// The webhook queue on disk (`webhooks.sqlite` in the data directory; in memory without
/// one): events wait here from their emission until a 2xx answer, so a restart delivers what
/// was queued. Bounded: past `maxEvents` the oldest rows go. Used only from the dispatcher's
/// queue (hence `@unchecked Sendable`).
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

    /// Appends events in one transaction; when the table then holds more than the bound, the
    /// oldest rows go. Returns the new items (with their ids) and the ids dropped.
    func append(_ events: [(key: String, eventId: String, body: Data)]) throws -> (items: [WebhookScheduler.Item], dropped: [Int64]) {
        let maxEvents = self.maxEvents
        let result = try db.write { db -> ([WebhookScheduler.Item], [Int64]) in
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
