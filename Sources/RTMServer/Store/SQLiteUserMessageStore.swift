import Foundation
import GRDB

/// The embedded default store: one SQLite database (WAL mode) through GRDB.
///
/// With `synchronous = NORMAL` (the default here) a committed message survives the server being
/// killed at any moment (`kill -9`); `fullSync` adds an fsync per commit so it also survives a
/// power loss.
public final class SQLiteUserMessageStore: UserMessageStore {
    private let db: DatabaseQueue
    /// See `UserMessageStore.epoch`.
    public let epoch: String

    /// Opens (creating if needed) the database at `path`; nil = in memory (tests).
    public init(path: String?, fullSync: Bool = false) throws {
        db = try SQLiteFile.open(path: path, fullSync: fullSync)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-user-messages") { db in
            try db.execute(sql: """
                CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE user_message (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    app TEXT NOT NULL, receiver TEXT NOT NULL, sender TEXT NOT NULL,
                    text TEXT, data BLOB, custom_type TEXT, ts INTEGER NOT NULL);
                CREATE INDEX user_message_receiver ON user_message(app, receiver, id);
                CREATE TABLE user_dropped (
                    app TEXT NOT NULL, receiver TEXT NOT NULL, count INTEGER NOT NULL,
                    PRIMARY KEY (app, receiver));
                """)
            try db.execute(sql: "INSERT INTO meta(key, value) VALUES ('epoch', ?)",
                           arguments: [String(UInt64.random(in: 1...UInt64.max), radix: 36)])
        }
        try migrator.migrate(db)
        epoch = try db.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'epoch'") } ?? "0"
    }

    public func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int) throws -> [Int64] {
        try db.write { db in
            for ack in acknowledgements {
                try db.cachedStatement(sql: "DELETE FROM user_message WHERE app = ? AND receiver = ? AND id <= ?")
                    .execute(arguments: [ack.appId, ack.receiver, ack.upTo])
            }
            // Prepared once per connection (cached), not parsed per message.
            let insert = try db.cachedStatement(sql: """
                INSERT INTO user_message(app, receiver, sender, text, data, custom_type, ts)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
            var ids: [Int64] = []
            ids.reserveCapacity(messages.count)
            var receivers: Set<[String]> = []
            for m in messages {
                try insert.execute(arguments: [m.appId, m.receiver, m.sender, m.text, m.data, m.customType, m.ts])
                ids.append(db.lastInsertedRowID)
                receivers.insert([m.appId, m.receiver])
            }
            for receiver in receivers {
                let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM user_message WHERE app = ? AND receiver = ?"),
                                             arguments: [receiver[0], receiver[1]]) ?? 0
                guard count > cap else { continue }
                try db.execute(sql: """
                    DELETE FROM user_message WHERE id IN (
                        SELECT id FROM user_message WHERE app = ? AND receiver = ? ORDER BY id LIMIT ?)
                    """, arguments: [receiver[0], receiver[1], count - cap])
                try addDropped(db, appId: receiver[0], receiver: receiver[1], count: count - cap)
            }
            return ids
        }
    }

    public func pending(appId: String, receiver: String, notBefore: Int64) throws -> [StoredUserMessage] {
        try db.write { db in
            try db.execute(sql: "DELETE FROM user_message WHERE app = ? AND receiver = ? AND ts < ?",
                           arguments: [appId, receiver, notBefore])
            if db.changesCount > 0 { try addDropped(db, appId: appId, receiver: receiver, count: db.changesCount) }
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, sender, text, data, custom_type, ts FROM user_message
                WHERE app = ? AND receiver = ? ORDER BY id
                """, arguments: [appId, receiver])
            return rows.map { row in
                StoredUserMessage(id: row["id"], appId: appId, receiver: receiver, sender: row["sender"],
                                  text: row["text"], data: row["data"], customType: row["custom_type"], ts: row["ts"])
            }
        }
    }

    public func takeDropped(appId: String, receiver: String) throws -> Int {
        try db.write { db in
            let count = try Int.fetchOne(db, sql: "SELECT count FROM user_dropped WHERE app = ? AND receiver = ?",
                                         arguments: [appId, receiver]) ?? 0
            if count > 0 {
                try db.execute(sql: "DELETE FROM user_dropped WHERE app = ? AND receiver = ?", arguments: [appId, receiver])
            }
            return count
        }
    }

    private func addDropped(_ db: Database, appId: String, receiver: String, count: Int) throws {
        try db.execute(sql: """
            INSERT INTO user_dropped(app, receiver, count) VALUES (?, ?, ?)
            ON CONFLICT(app, receiver) DO UPDATE SET count = count + excluded.count
            """, arguments: [appId, receiver, count])
    }
}
