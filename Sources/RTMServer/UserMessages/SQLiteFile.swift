import Foundation
import GRDB

/// Opens the embedded store's SQLite databases the same way: WAL journal, `synchronous`
/// NORMAL (a commit survives `kill -9`) or FULL (also a power loss), the folder created (or
/// a `DataDirectoryError` saying why it cannot be).
enum SQLiteFile {
    /// The database at `path` (created if needed); nil = in memory.
    static func open(path: String?, fullSync: Bool) throws -> DatabaseQueue {
        var config = Configuration()
        config.journalMode = .wal
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(fullSync ? "FULL" : "NORMAL")")
        }
        guard let path else { return try DatabaseQueue(configuration: config) }
        try DataDirectory.prepare((path as NSString).deletingLastPathComponent)
        return try DatabaseQueue(path: path, configuration: config)
    }

    /// As `open(path:fullSync:)`, then brought up to date: each migration (a name and its SQL)
    /// runs once, in order.
    static func open(path: String?, fullSync: Bool, migrations: KeyValuePairs<String, String>) throws -> DatabaseQueue {
        let db = try open(path: path, fullSync: fullSync)
        var migrator = DatabaseMigrator()
        for (name, sql) in migrations {
            migrator.registerMigration(name) { db in try db.execute(sql: sql) }
        }
        try migrator.migrate(db)
        return db
    }
}
