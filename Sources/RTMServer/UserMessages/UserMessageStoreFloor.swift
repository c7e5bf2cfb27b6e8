import Foundation
import GRDB

/// The floor of the user-message store: what SQLite, under GRDB and opened as the store opens
/// it, takes to insert and delete the rows of a load, with nothing of the store around it (no
/// client message id records, no waiting counts, no mailbox, no sockets). `rtm bench pairs
/// --users` prints it beside its own figure, on the same disk and in the server's batch sizes.
public enum UserMessageStoreFloor {
    /// What a floor run did and how fast.
    public struct Result: Codable, Sendable {
        public var rows: Int
        public var batch: Int
        public var pairs: Int
        public var seconds: Double
        public var rowsPerSecond: Double
    }

    /// Stores `rows` messages among `pairs` receivers (receiver i gets `size`-byte texts from
    /// sender i), `batch` per transaction, each transaction also deleting the rows of the one
    /// before (receivers online, acknowledging everything), as the store's group commits do: a
    /// fresh database in `directory`, opened as `SQLiteUserMessageStore` opens its own (its
    /// tables and indexes, WAL, `synchronous` NORMAL or FULL, its page cache), removed after.
    public static func run(directory: String, rows: Int, batch: Int, pairs: Int, size: Int, fullSync: Bool = false) throws -> Result {
        precondition(rows > 0 && batch > 0 && pairs > 0)
        let path = (directory as NSString).appendingPathComponent("rtm-store-floor-\(getpid()).sqlite")
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteUserMessageStore(path: path, fullSync: fullSync)
        let app = "0123456789abcdef0123456789abcdef"
        let receivers = (0..<pairs).map { "bench-sub-\($0)" }, senders = (0..<pairs).map { "bench-pub-\($0)" }
        let text = String(repeating: "x", count: size)
        let ts = Int64(Date().timeIntervalSince1970 * 1000)
        var acknowledged: [Int: Int64] = [:]
        var done = 0
        let start = DispatchTime.now().uptimeNanoseconds
        while done < rows {
            let range = done..<min(rows, done + batch)
            let previous = acknowledged
            acknowledged = try store.db.write { db in
                let delete = try SQLiteFastStatement(db, sql: "DELETE FROM user_message WHERE app = ? AND receiver = ? AND id <= ?")
                for (pair, upTo) in previous {
                    delete.bind(1, app)
                    delete.bind(2, receivers[pair])
                    delete.bind(3, upTo)
                    try delete.run()
                }
                let insert = try SQLiteFastStatement(db, sql: """
                    INSERT INTO user_message(app, receiver, sender, text, data, custom_type, ts)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """)
                var last: [Int: Int64] = [:]
                for index in range {
                    let pair = index % pairs
                    insert.bind(1, app)
                    insert.bind(2, receivers[pair])
                    insert.bind(3, senders[pair])
                    insert.bind(4, text)
                    insert.bind(5, nil as Data?)
                    insert.bind(6, nil as String?)
                    insert.bind(7, ts)
                    try insert.run()
                    last[pair] = db.lastInsertedRowID
                }
                return last
            }
            done = range.upperBound
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Result(rows: rows, batch: batch, pairs: pairs, seconds: seconds, rowsPerSecond: Double(rows) / seconds)
    }
}
