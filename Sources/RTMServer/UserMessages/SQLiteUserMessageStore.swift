import Foundation
import GRDB

/// The embedded default store: one SQLite database (WAL mode) through GRDB.
///
/// With `synchronous = NORMAL` (the default here) a committed message survives the server being
/// killed at any moment (`kill -9`); `fullSync` adds an fsync per commit so it also survives a
/// power loss.
public final class SQLiteUserMessageStore: UserMessageStore, @unchecked Sendable {
    let db: DatabaseQueue
    /// Messages waiting per receiver, as far as known (loaded by one COUNT on first use, then
    /// kept up to date), so a commit checks the cap without counting rows. Like every call,
    /// confined to the store's thread (`thread`, its only caller's): hence `@unchecked Sendable`.
    private var waiting: [Receiver: Int] = [:]
    /// Which client message ids each sender used (M-3).
    private var resends: SQLiteResendRecords

    /// A receiver: (app id, user id).
    private typealias Receiver = UserKey
    /// See `UserMessageStore.epoch`.
    public let epoch: String
    /// See `UserMessageStore.thread`: SQLite's calls block on the disk, one at a time.
    public let thread = StoreThread(label: "rtm.user-store")

    /// Opens (creating if needed) the database at `path`; nil = in memory (tests).
    /// `resendMergeInterval` (ms): how often the records of used client message ids move from
    /// their log into their index (`SQLiteResendRecords`; tests vary it).
    public init(path: String?, fullSync: Bool = false, resendMergeInterval: Int64 = 1000) throws {
        resends = SQLiteResendRecords(mergeInterval: resendMergeInterval)
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
        // SPEC M-3 across restarts: which client message ids each sender used (PROTOCOL §3.2),
        // written in the transaction that stores the message, so a resend after a `kill -9`
        // is recognised. Version 2 kept a row per message; version 3 a row per run
        // (`SQLiteResendRecords`).
        migrator.registerMigration("v2-user-message-resends") { db in
            try db.execute(sql: """
                CREATE TABLE user_message_sent (
                    app TEXT NOT NULL, sender TEXT NOT NULL, client_msg_id INTEGER NOT NULL,
                    id INTEGER NOT NULL, ts INTEGER NOT NULL,
                    PRIMARY KEY (app, sender, client_msg_id)) WITHOUT ROWID;
                CREATE INDEX user_message_sent_ts ON user_message_sent(ts);
                """)
        }
        migrator.registerMigration("v3-user-message-resend-runs") { db in try SQLiteResendRecords.migrate(db) }
        try migrator.migrate(db)
        // A 64 MB page cache (instead of 2 MB): with a thousand busy receivers the pages a commit
        // touches stay in memory instead of being read back from the WAL.
        try db.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA cache_size = -65536") }
        epoch = try db.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'epoch'") } ?? "0"
    }

    public func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                       resendsSince: Int64) throws -> [CommittedUserMessage] {
        do {
            return try db.write { db in try commit(db, messages, acknowledgements: acknowledgements, cap: cap, resendsSince: resendsSince) }
        } catch {
            waiting = [:]   // rolled back: recount
            resends.invalidate()
            throw error
        }
    }

    private func commit(_ db: Database, _ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)],
                        cap: Int, resendsSince: Int64) throws -> [CommittedUserMessage] {
        let delete = try SQLiteFastStatement(db, sql: "DELETE FROM user_message WHERE app = ? AND receiver = ? AND id <= ?")
        for ack in acknowledgements {
            delete.bind(1, ack.appId)
            delete.bind(2, ack.receiver)
            delete.bind(3, ack.upTo)
            try delete.run()
            let key = Receiver(appId: ack.appId, userId: ack.receiver)
            if let known = waiting[key] { waiting[key] = max(0, known - db.changesCount) }
        }
        // Prepared once per connection (cached), not parsed per message.
        let insert = try SQLiteFastStatement(db, sql: """
            INSERT INTO user_message(app, receiver, sender, text, data, custom_type, ts)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        var results: [CommittedUserMessage] = []
        results.reserveCapacity(messages.count)
        // Messages added per receiver, counted per run of one receiver (the messages of one
        // sender's read usually go to one): a hash per run, not per message.
        var added: [Receiver: Int] = [:]
        var run: (receiver: Receiver, count: Int)?
        // This commit's client ids → store ids per sender: resends within the batch, then the
        // records.
        var claims = SQLiteResendRecords.CommitClaims()
        for m in messages {
            var claim: (slot: Int, clientID: Int64)?
            if let clientMsgId = m.clientMsgId {
                let sender = SQLiteResendRecords.Sender(appId: m.appId, userId: m.sender)
                let slot = claims.slot(of: sender), clientID = Int64(bitPattern: clientMsgId)
                claim = (slot, clientID)
                // M-3: a resend of a message stored within the window (earlier in this batch, or
                // in an earlier commit) is not stored again; it gets the first id.
                if let first = try claims.id(in: slot, of: clientID) ?? resends.firstID(db, of: sender, clientID: clientID, since: resendsSince) {
                    results.append(CommittedUserMessage(id: first, isResend: true))
                    continue
                }
            }
            insert.bind(1, m.appId)
            insert.bind(2, m.receiver)
            insert.bind(3, m.sender)
            insert.bind(4, m.text)
            insert.bind(5, m.data)
            insert.bind(6, m.customType)
            insert.bind(7, m.ts)
            try insert.run()
            let id = db.lastInsertedRowID
            if let claim { claims.claim(in: claim.slot, claim.clientID, id: id) }
            results.append(CommittedUserMessage(id: id))
            if run?.receiver.userId == m.receiver, run?.receiver.appId == m.appId {
                run!.count += 1
            } else {
                if let run { added[run.receiver, default: 0] += run.count }
                run = (Receiver(appId: m.appId, userId: m.receiver), 1)
            }
        }
        if let run { added[run.receiver, default: 0] += run.count }
        try resends.record(db, claims, now: UserMailbox.wallMillis, since: resendsSince)
        for (receiver, count) in added {
            var total: Int
            if let known = waiting[receiver] {
                total = known + count
            } else {
                total = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM user_message WHERE app = ? AND receiver = ?"),
                                         arguments: [receiver.appId, receiver.userId]) ?? 0
            }
            if total > cap {
                try db.execute(sql: """
                    DELETE FROM user_message WHERE id IN (
                        SELECT id FROM user_message WHERE app = ? AND receiver = ? ORDER BY id LIMIT ?)
                    """, arguments: [receiver.appId, receiver.userId, total - cap])
                try addDropped(db, appId: receiver.appId, receiver: receiver.userId, count: total - cap)
                total = cap
            }
            waiting[receiver] = total
        }
        if waiting.count > 100_000 { waiting = [:] }   // bounded: recounted as receivers come back
        return results
    }

    public func pending(appId: String, receiver: String, notBefore: Int64) throws -> [StoredUserMessage] {
        waiting[Receiver(appId: appId, userId: receiver)] = nil   // recounted at its next message
        return try db.write { db in
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
