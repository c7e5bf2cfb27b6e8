import Foundation
import GRDB
import RTMProtocol

/// The embedded store of metadata and history: one SQLite database (WAL) through GRDB, next
/// to the user-message database.
final class SQLiteServiceStore: ServiceStore {
    private let db: DatabaseQueue

    /// Opens (creating if needed) the database at `path`; nil = in memory.
    init(path: String?, fullSync: Bool) throws {
        db = try SQLiteFile.open(path: path, fullSync: fullSync, migrations: [
            "v1-metadata-history": """
                CREATE TABLE metadata (
                    app TEXT NOT NULL, type TEXT NOT NULL, target TEXT NOT NULL, body BLOB NOT NULL,
                    PRIMARY KEY (app, type, target));
                CREATE TABLE history (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    app TEXT NOT NULL, channel_type TEXT NOT NULL, channel TEXT NOT NULL,
                    publisher TEXT NOT NULL, text TEXT, data BLOB, custom_type TEXT, ts INTEGER NOT NULL, dedup TEXT);
                CREATE UNIQUE INDEX history_dedup ON history(app, channel_type, channel, dedup);
                CREATE UNIQUE INDEX history_channel_ts ON history(app, channel_type, channel, ts);
                CREATE INDEX history_ts ON history(ts);
                """,
        ])
    }

    func loadMetadata(_ key: StorageKey) throws -> Metadata? {
        let body = try db.read { db in
            try Data.fetchOne(db, sql: "SELECT body FROM metadata WHERE app = ? AND type = ? AND target = ?",
                              arguments: [key.appId, key.type.rawValue, key.target])
        }
        return try body.map { try JSONDecoder().decode(Metadata.self, from: $0) }
    }

    func saveMetadata(_ key: StorageKey, _ metadata: Metadata) throws {
        let body = try JSONEncoder().encode(metadata)
        try db.write { db in
            try db.execute(sql: """
                INSERT INTO metadata(app, type, target, body) VALUES (?, ?, ?, ?)
                ON CONFLICT(app, type, target) DO UPDATE SET body = excluded.body
                """, arguments: [key.appId, key.type.rawValue, key.target, body])
        }
    }

    func appendHistory(_ r: HistoryRecord) throws -> Int64? {
        try db.write { db in
            let newest = try Int64.fetchOne(db, sql: "SELECT MAX(ts) FROM history WHERE app = ? AND channel_type = ? AND channel = ?",
                                            arguments: [r.appId, r.channelType, r.channel]) ?? 0
            let ts = max(r.message.ts, newest + 1)
            try db.execute(sql: """
                INSERT OR IGNORE INTO history(app, channel_type, channel, publisher, text, data, custom_type, ts, dedup)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [r.appId, r.channelType, r.channel, r.message.publisher, r.message.text,
                                 r.message.data, r.message.customType, ts, r.dedupKey])
            return db.changesCount > 0 ? ts : nil
        }
    }

    func history(appId: String, channelType: String, channel: String, start: Int64, end: Int64, limit: Int) throws -> [HistoryMessage] {
        try db.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT publisher, text, data, custom_type, ts FROM history
                WHERE app = ? AND channel_type = ? AND channel = ? AND ts < ? AND ts >= ?
                ORDER BY ts DESC LIMIT ?
                """, arguments: [appId, channelType, channel, start, end, limit])
            return rows.map { row in
                HistoryMessage(publisher: row["publisher"], text: row["text"], data: row["data"],
                               customType: row["custom_type"], ts: row["ts"])
            }
        }
    }

    func trimHistory(olderThan millis: Int64) throws -> Int {
        try db.write { db in
            try db.execute(sql: "DELETE FROM history WHERE ts < ?", arguments: [millis])
            return db.changesCount
        }
    }
}
