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
}
