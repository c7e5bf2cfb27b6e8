import Foundation
import GRDB
@testable import RTMServer
import Testing

/// The embedded user-message store on its own (a real SQLite file): resends (SPEC M-3) are
/// recognised in one batch, in later commits and after the store is opened again, whether the
/// first attempt was alone or in a run of consecutive ids.
struct SQLiteUserMessageStoreTests {
    private func message(_ text: String, clientMsgId: UInt64?, sender: String = "alice", ts: Int64 = UserMailboxClock.now) -> StoredUserMessage {
        StoredUserMessage(appId: "app", receiver: "bob", sender: sender, text: text, data: nil, customType: nil, ts: ts, clientMsgId: clientMsgId)
    }

    private func temporaryStorePath() throws -> (path: String, remove: () -> Void) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return (dir.appendingPathComponent("rtm.sqlite").path, { try? FileManager.default.removeItem(at: dir) })
    }

    @Test("M-3: a resend (same sender, same msgId) is stored once, in one batch, in a later commit and after a reopen; outside the window it is new",
          arguments: [0, Int64.max])
    func resendsStoredOnce(mergeInterval: Int64) throws {
        let (path, remove) = try temporaryStorePath()
        defer { remove() }
        let since = UserMailboxClock.now - 60_000
        do {
            let store = try SQLiteUserMessageStore(path: path, resendMergeInterval: mergeInterval)
            let first = try store.commit([message("a", clientMsgId: 7), message("a", clientMsgId: 7), message("b", clientMsgId: nil)],
                                         acknowledgements: [], cap: 100, resendsSince: since)
            #expect(first == [CommittedUserMessage(id: 1), CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 2)])
            // Another sender may use the same id.
            let second = try store.commit([message("a", clientMsgId: 7), message("c", clientMsgId: 7, sender: "carol")],
                                          acknowledgements: [], cap: 100, resendsSince: since)
            #expect(second == [CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 3)])
        }
        // Opened again (a restart): the record survived with the messages.
        let store = try SQLiteUserMessageStore(path: path, resendMergeInterval: mergeInterval)
        let again = try store.commit([message("a", clientMsgId: 7), message("d", clientMsgId: 8)], acknowledgements: [], cap: 100, resendsSince: since)
        #expect(again == [CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 4)])
        #expect(try store.pending(appId: "app", receiver: "bob", notBefore: 0).compactMap(\.text) == ["a", "b", "c", "d"])
        // Past the window (its start after the first attempt) the id is new again.
        let late = try store.commit([message("a", clientMsgId: 7)], acknowledgements: [], cap: 100, resendsSince: UserMailboxClock.now + 1)
        #expect(late == [CommittedUserMessage(id: 5)])
    }

    @Test("M-3: runs of consecutive msgIds (one record per sender and commit) answer a resend of any of their messages, interleaved senders, out-of-order ids and after a reopen; records in the log or merged into the index",
          arguments: [0, Int64.max])
    func resendsOfRuns(mergeInterval: Int64) throws {
        let (path, remove) = try temporaryStorePath()
        defer { remove() }
        let since = UserMailboxClock.now - 60_000
        let start: UInt64 = 1 << 62   // an SDK's random start
        var firstIDs: [UInt64: Int64] = [:]
        do {
            let store = try SQLiteUserMessageStore(path: path, resendMergeInterval: mergeInterval)
            // Alice and carol interleaved; alice's ids out of order within the commit and one
            // missing (start + 5), which splits her run.
            var batch: [StoredUserMessage] = []
            for i in [UInt64(1), 0, 2, 3, 4, 6, 7, 8, 9] {
                batch.append(message("a\(i)", clientMsgId: start + i))
                batch.append(message("c\(i)", clientMsgId: start + i, sender: "carol"))
            }
            let results = try store.commit(batch, acknowledgements: [], cap: 1000, resendsSince: since)
            #expect(results.allSatisfy { !$0.isResend })
            for (m, r) in zip(batch, results) where m.sender == "alice" { firstIDs[m.clientMsgId!] = r.id }
            // A later commit: new ids above the run are new; resends from the middle, both
            // ends and across the gap are recognised; the gap itself is new.
            let next = try store.commit([message("x", clientMsgId: start + 10), message("r", clientMsgId: start + 3),
                                         message("g", clientMsgId: start + 5), message("r", clientMsgId: start),
                                         message("r", clientMsgId: start + 9)],
                                        acknowledgements: [], cap: 1000, resendsSince: since)
            #expect(next.map(\.isResend) == [false, true, false, true, true])
            #expect(next[1].id == firstIDs[start + 3] && next[3].id == firstIDs[start] && next[4].id == firstIDs[start + 9])
            firstIDs[start + 10] = next[0].id
            firstIDs[start + 5] = next[2].id
        }
        // After a reopen (nothing cached) every id recorded so far is a resend with its first
        // id, and a restarted SDK's new random start is new.
        let store = try SQLiteUserMessageStore(path: path, resendMergeInterval: mergeInterval)
        let ids = (0...10).map { start + UInt64($0) }
        let again = try store.commit(ids.map { message("r", clientMsgId: $0) } + [message("n", clientMsgId: 12_345)],
                                     acknowledgements: [], cap: 1000, resendsSince: since)
        #expect(again.dropLast().allSatisfy { $0.isResend })
        #expect(again.dropLast().map(\.id) == ids.map { firstIDs[$0]! })
        #expect(again.last?.isResend == false)
        // Only the first attempts are stored: 18 + 2 + 1.
        #expect(try store.pending(appId: "app", receiver: "bob", notBefore: 0).count == 21)
    }

    @Test("M-3: a data directory written by the version that kept a record per message keeps recognising those resends")
    func migratesPerMessageRecords() throws {
        let (path, remove) = try temporaryStorePath()
        defer { remove() }
        // The schema as version 2 left it: a stored message and its record.
        do {
            let db = try DatabaseQueue(path: path)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1-user-messages") { db in
                try db.execute(sql: """
                    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                    INSERT INTO meta(key, value) VALUES ('epoch', 'old');
                    CREATE TABLE user_message (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        app TEXT NOT NULL, receiver TEXT NOT NULL, sender TEXT NOT NULL,
                        text TEXT, data BLOB, custom_type TEXT, ts INTEGER NOT NULL);
                    CREATE INDEX user_message_receiver ON user_message(app, receiver, id);
                    CREATE TABLE user_dropped (app TEXT NOT NULL, receiver TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (app, receiver));
                    """)
            }
            migrator.registerMigration("v2-user-message-resends") { db in
                try db.execute(sql: """
                    CREATE TABLE user_message_sent (
                        app TEXT NOT NULL, sender TEXT NOT NULL, client_msg_id INTEGER NOT NULL,
                        id INTEGER NOT NULL, ts INTEGER NOT NULL,
                        PRIMARY KEY (app, sender, client_msg_id)) WITHOUT ROWID;
                    CREATE INDEX user_message_sent_ts ON user_message_sent(ts);
                    """)
            }
            try migrator.migrate(db)
            try db.write { db in
                try db.execute(sql: "INSERT INTO user_message(app, receiver, sender, text, ts) VALUES ('app', 'bob', 'alice', 'old', ?)",
                               arguments: [UserMailboxClock.now])
                try db.execute(sql: "INSERT INTO user_message_sent(app, sender, client_msg_id, id, ts) VALUES ('app', 'alice', ?, 1, ?)",
                               arguments: [Int64(bitPattern: UInt64.max - 3), UserMailboxClock.now])
            }
        }
        let store = try SQLiteUserMessageStore(path: path)
        #expect(store.epoch == "old")
        let results = try store.commit([message("old", clientMsgId: UInt64.max - 3), message("new", clientMsgId: UInt64.max - 2)],
                                       acknowledgements: [], cap: 100, resendsSince: UserMailboxClock.now - 60_000)
        #expect(results == [CommittedUserMessage(id: 1, isResend: true), CommittedUserMessage(id: 2)])
    }

    @Test("M-3: resend records: claims make runs of consecutive ids (any order), runs that continue each other coalesce, and a commit's runs round-trip through the log's bytes; damaged bytes are a typed error")
    func resendRunCoding() throws {
        let runs = SQLiteResendRecords.runs(of: [(5, 50), (3, 30), (4, 40), (9, 90), (.max, 1), (.max - 1, 2)], at: 77)
        #expect(runs == [.init(first: 3, ids: [30, 40, 50], recordedAt: 77), .init(first: 9, ids: [90], recordedAt: 77),
                         .init(first: .max - 1, ids: [2, 1], recordedAt: 77)])
        let coalesced = SQLiteResendRecords.coalesced([.init(first: 6, ids: [60, 70], recordedAt: 80), runs[0], runs[1]])
        #expect(coalesced == [.init(first: 3, ids: [30, 40, 50, 60, 70], recordedAt: 80), .init(first: 9, ids: [90], recordedAt: 77)])
        let senders: [SQLiteResendRecords.Sender: [SQLiteResendRecords.Run]] = [
            .init(appId: "app", userId: "alice"): runs, .init(appId: "app", userId: "ünï"): [.init(first: -4, ids: [1], recordedAt: 77)]]
        let bytes = ResendRunCoding.encode(senders.map { (sender: $0.key, runs: $0.value) }, at: 77)
        #expect(try ResendRunCoding.decode(bytes) == senders)
        #expect(ResendRunCoding.decodeID(ResendRunCoding.encodeIDs([7, -8, 9]), at: 1) == -8)
        #expect(ResendRunCoding.decodeID(ResendRunCoding.encodeIDs([7]), at: 1) == nil)
        #expect(throws: ResendRunCoding.Malformed.self) { try ResendRunCoding.decode(bytes.dropLast()) }
        #expect(throws: ResendRunCoding.Malformed.self) { try ResendRunCoding.decode(bytes + [0]) }
    }

    @Test("M-3: ClientIDSpans: runs close together share an interval, far ones start another, at most four are kept (merged, never narrowed), old ones are forgotten")
    func clientIDSpans() {
        var spans = ClientIDSpans()
        #expect(!spans.mayContain(5))
        spans.record(100, 110, at: 1)
        spans.record(111, 120, at: 2)
        spans.record(130, 140, at: 3)   // within the gap: same interval
        #expect(spans.intervals == [.init(low: 100, high: 140, recordedAt: 3)])
        #expect(spans.mayContain(100) && spans.mayContain(125) && spans.mayContain(140))
        #expect(!spans.mayContain(99) && !spans.mayContain(141))
        // A restarted SDK: far away, its own interval.
        spans.record(.max - 10, .max, at: 4)
        spans.record(.min, .min + 1, at: 5)
        spans.record(1 << 40, (1 << 40) + 1, at: 6)
        #expect(spans.intervals.count == 4)
        // A fifth: the two closest merge, and everything recorded is still covered.
        spans.record(1 << 41, 1 << 41, at: 7)
        #expect(spans.intervals.count == 4)
        for id: Int64 in [100, 140, .max, .min, .min + 1, 1 << 40, 1 << 41] { #expect(spans.mayContain(id)) }
        // Forgetting: only intervals whose last record is older than the window start.
        let someLeft = spans.forget(before: 5)
        #expect(someLeft)
        #expect(!spans.mayContain(.max))
        #expect(spans.mayContain(.min) && spans.mayContain(1 << 41))
        let anyLeft = spans.forget(before: 100)
        #expect(!anyLeft)
        #expect(spans.intervals.isEmpty)
    }

    @Test("M-1: SQLiteFastStatement (the store's per-message statements) binds text (empty is '', nil is NULL), integers and blobs as GRDB would, runs again after a reset, and a failure is GRDB's DatabaseError with SQLite's code")
    func fastStatement() throws {
        let db = try DatabaseQueue()
        try db.write { db in
            try db.execute(sql: "CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT, n INTEGER NOT NULL, b BLOB)")
            let insert = try SQLiteFastStatement(db, sql: "INSERT INTO t(k, v, n, b) VALUES (?, ?, ?, ?)")
            let rows: [(String, String?, Int64, Data?)] = [("ünï", "", -7, Data([0, 1, 255])), ("", nil, .max, nil), ("x", "ok", 0, Data())]
            for (k, v, n, b) in rows {
                insert.bind(1, k)
                insert.bind(2, v)
                insert.bind(3, n)
                insert.bind(4, b)
                try insert.run()
            }
            let read = try Row.fetchAll(db, sql: "SELECT k, v, n, b, v IS NULL AS vNull, b IS NULL AS bNull FROM t ORDER BY rowid")
            #expect(read.map { $0["k"] as String } == ["ünï", "", "x"])
            #expect(read.map { $0["vNull"] as Bool } == [false, true, false])
            #expect(read[0]["v"] as String == "")
            #expect(read.map { $0["n"] as Int64 } == [-7, .max, 0])
            #expect(read[0]["b"] as Data == Data([0, 1, 255]))
            #expect(read[1]["bNull"] as Bool && !(read[2]["bNull"] as Bool))   // empty Data: an empty blob, not NULL
            // The same key again: the constraint's error, typed, and the statement still usable.
            insert.bind(1, "x")
            insert.bind(2, "again")
            insert.bind(3, 1)
            insert.bind(4, nil as Data?)
            #expect { try insert.run() } throws: { error in
                (error as? DatabaseError)?.resultCode == .SQLITE_CONSTRAINT
            }
            insert.bind(1, "y")
            try insert.run()
            #expect(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") == 4)
        }
    }

    @Test("M-1: a receiver's queue keeps its newest `cap` messages (the oldest dropped and counted once for the receiver's dropped notice), messages older than the age limit go the same way, and an acknowledgement removes what it covers")
    func capAgeAndAcknowledgements() throws {
        let (path, remove) = try temporaryStorePath()
        defer { remove() }
        let store = try SQLiteUserMessageStore(path: path)
        let since = UserMailboxClock.now - 60_000
        let ids = try store.commit((1...5).map { message("m\($0)", clientMsgId: nil) }, acknowledgements: [], cap: 3, resendsSince: since)
        #expect(ids.count == 5)
        #expect(try store.pending(appId: "app", receiver: "bob", notBefore: 0).compactMap(\.text) == ["m3", "m4", "m5"])
        #expect(try store.takeDropped(appId: "app", receiver: "bob") == 2)
        #expect(try store.takeDropped(appId: "app", receiver: "bob") == 0)   // once

        // Past the age limit: an old message is dropped when the queue is read, and counted.
        _ = try store.commit([message("old", clientMsgId: nil, ts: UserMailboxClock.now - 8 * 86_400_000)], acknowledgements: [],
                             cap: 10, resendsSince: since)
        let fresh = try store.pending(appId: "app", receiver: "bob", notBefore: UserMailboxClock.now - 7 * 86_400_000)
        #expect(fresh.compactMap(\.text) == ["m3", "m4", "m5"])
        #expect(try store.takeDropped(appId: "app", receiver: "bob") == 1)

        // Acknowledged up to m4: only m5 is left.
        let m4 = try #require(fresh.first { $0.text == "m4" }?.id)
        _ = try store.commit([], acknowledgements: [(appId: "app", receiver: "bob", upTo: m4)], cap: 10, resendsSince: since)
        #expect(try store.pending(appId: "app", receiver: "bob", notBefore: 0).compactMap(\.text) == ["m5"])
    }
}

/// Wall-clock milliseconds, as the mailbox stamps messages.
enum UserMailboxClock {
    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
