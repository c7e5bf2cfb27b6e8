import Foundation
import GRDB
import GRDBSQLite

/// A prepared statement of the user-message store's hot path (a row per message or per receiver
/// in every commit), bound and run through SQLite's C API instead of GRDB's `StatementArguments`.
///
/// Why: measured with `rtm bench store` (1,000 pairs, 500 messages per commit), building the
/// arguments (an array of existentials, each converted to a `DatabaseValue`) cost more than
/// SQLite's own work for these statements. The statement itself is GRDB's (prepared and cached by
/// the connection, finalized with it); only binding and stepping bypass it. Like the store, used
/// only inside its transactions, by its one owner.
struct SQLiteFastStatement {
    private let statement: Statement
    private let connection: OpaquePointer?
    /// `SQLITE_TRANSIENT`: SQLite copies the bytes before the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)


    /// The connection's cached statement for `sql`.
    init(_ db: Database, sql: String) throws {
        statement = try db.cachedStatement(sql: sql)
        connection = db.sqliteConnection
    }

    /// Binds parameter `index` (1-based) to `value`.
    func bind(_ index: Int32, _ value: String) {
        var value = value
        value.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                // An empty string still needs a non-null pointer (NULL would bind SQL NULL).
                _ = sqlite3_bind_text(statement.sqliteStatement, index, "", 0, Self.transient)
                return
            }
            _ = base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { chars in
                sqlite3_bind_text(statement.sqliteStatement, index, chars, Int32(bytes.count), Self.transient)
            }
        }
    }

    func bind(_ index: Int32, _ value: String?) {
        guard let value else { sqlite3_bind_null(statement.sqliteStatement, index); return }
        bind(index, value)
    }

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(statement.sqliteStatement, index, value)
    }

    func bind(_ index: Int32, _ value: Data?) {
        guard let value else { sqlite3_bind_null(statement.sqliteStatement, index); return }
        value.withUnsafeBytes { bytes in
            _ = sqlite3_bind_blob(statement.sqliteStatement, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), Self.transient)
        }
    }

    /// Runs the statement to its end (an INSERT, UPDATE or DELETE) with the values bound since
    /// the last run, and resets it for the next; a failure throws GRDB's `DatabaseError` with
    /// SQLite's code and message.
    func run() throws {
        let code = sqlite3_step(statement.sqliteStatement)
        let message = code == SQLITE_DONE ? nil : connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        sqlite3_reset(statement.sqliteStatement)
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }
}
