import Foundation
import GRDB

/// The embedded store's record of the client message ids each sender used (SPEC M-3,
/// PROTOCOL §3.2), written in the transaction that stores the messages, so that a resend (after
/// a `kill -9`, or on a new connection) gets the first message's id and is neither stored nor
/// delivered again.
///
/// How it stays cheap (measured with `rtm bench pairs --users`; a row per message, keyed by
/// sender, took 100 pairs from 220 k to 115 k messages/s and 1,000 pairs at 50,000/s from
/// 0.3 ms to 34 ms per commit): a commit's cost is the pages it dirties, and records keyed by
/// sender dirty a page per sender. So:
/// - **Runs**: a sender's consecutive client ids (what an SDK numbering its messages sends)
///   are one record holding the store ids they got.
/// - **A log, then an index**: each commit appends its runs as **one** row to
///   `user_message_sent_log` (pages in commit order); about once a second (`mergeInterval`)
///   the runs gathered meanwhile, coalesced per sender, move into `user_message_sent_run`,
///   keyed by sender, where lookups go. The runs not merged yet are also kept in memory.
/// - **Nothing is read in the common case**: a message's id is looked up only when it lies in
///   the sender's `ClientIDSpans` (in memory, read from the index once per sender after a
///   restart); an SDK's next id lies above them.
///
/// Confined to the store's one user, inside its transactions (like the store). After a
/// transaction fails, `invalidate()` drops the memory, which is read again from the tables.
struct SQLiteResendRecords {
    /// A sender, as the records key it: (app id, user id), the server's `UserKey`.
    typealias Sender = UserKey

    /// Consecutive client ids from `first` and the store ids they got, in order.
    struct Run: Equatable, Sendable {
        var first: Int64
        var ids: [Int64]
        /// When it was recorded (ms).
        var recordedAt: Int64
        var last: Int64 { first + Int64(ids.count) - 1 }
    }

    /// How often the log's runs move into the index (ms).
    let mergeInterval: Int64

    /// Recent senders' spans (absent: not read since the store opened).
    private var spans: [Sender: ClientIDSpans] = [:] {
        didSet { lastSpans = nil }
    }
    /// The sender whose spans were looked up last, and where they are: a sender's messages come
    /// in runs (one read of its connection), so a run costs one hash, not one per message.
    /// Forgotten whenever `spans` changes (an index is valid only until then).
    private var lastSpans: (sender: Sender, index: [Sender: ClientIDSpans].Index)?
    /// Runs in the log, not merged yet (in memory for lookups), and how many ids they hold.
    private var unmerged: [Sender: [Run]] = [:]
    private var unmergedIDs = 0
    private var mergedAt: Int64 = 0
    /// The memory no longer matches the tables (a transaction failed): read them again.
    private var stale = true
    private var pruning = ResendRecordPruning()

    /// Records merged into the index every `mergeInterval` ms.
    init(mergeInterval: Int64 = 1000) {
        self.mergeInterval = mergeInterval
    }

    /// Creates the tables (migration `v3-user-message-resend-runs`) and moves the records of
    /// version 2 (a row per message) into the index, as runs of one.
    static func migrate(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE user_message_sent_run (
                app TEXT NOT NULL, sender TEXT NOT NULL,
                first INTEGER NOT NULL, last INTEGER NOT NULL, ids BLOB NOT NULL, ts INTEGER NOT NULL,
                PRIMARY KEY (app, sender, first)) WITHOUT ROWID;
            CREATE INDEX user_message_sent_run_ts ON user_message_sent_run(ts);
            CREATE TABLE user_message_sent_log (seq INTEGER PRIMARY KEY, runs BLOB NOT NULL, ts INTEGER NOT NULL);
            """)
        let insert = try db.makeStatement(sql: "INSERT INTO user_message_sent_run(app, sender, first, last, ids, ts) VALUES (?, ?, ?, ?, ?, ?)")
        let rows = try Row.fetchCursor(db, sql: "SELECT app, sender, client_msg_id, id, ts FROM user_message_sent")
        while let row = try rows.next() {
            let clientID: Int64 = row["client_msg_id"]
            try insert.execute(arguments: [row["app"] as String, row["sender"] as String, clientID, clientID,
                                           ResendRunCoding.encodeIDs([row["id"] as Int64]), row["ts"] as Int64])
        }
        try db.execute(sql: "DROP TABLE user_message_sent")
    }

    /// A transaction failed and was rolled back: what memory holds may not be in the tables.
    mutating func invalidate() {
        stale = true
    }

    /// The store id given to an earlier message of `sender` with client id `clientID` (the
    /// bit pattern of the `UInt64`), recorded at or after `since` (ms); nil if there is none.
    mutating func firstID(_ db: Database, of sender: Sender, clientID: Int64, since: Int64) throws -> Int64? {
        try reloadIfStale(db)
        guard spans.values[try spansIndex(db, of: sender, since: since)].mayContain(clientID) else { return nil }
        for run in unmerged[sender] ?? [] where run.recordedAt >= since && run.first <= clientID && clientID <= run.last {
            return run.ids[Int(clientID - run.first)]
        }
        // Runs within the window do not overlap (an id used in one is a resend, never
        // recorded again), so the one that starts last at or below the id is the only one
        // that can hold it.
        let statement = try db.cachedStatement(sql: """
            SELECT first, last, ids FROM user_message_sent_run
            WHERE app = ? AND sender = ? AND first <= ? AND ts >= ? ORDER BY first DESC LIMIT 1
            """)
        guard let row = try Row.fetchOne(statement, arguments: [sender.appId, sender.userId, clientID, since]) else { return nil }
        let first: Int64 = row["first"], last: Int64 = row["last"], ids: Data = row["ids"]
        guard clientID <= last else { return nil }
        return ResendRunCoding.decodeID(ids, at: Int(clientID - first))
    }

    /// Records what one commit stored (`CommitClaims`). `now` (ms) dates the records; `since`
    /// is the window's start.
    mutating func record(_ db: Database, _ claims: CommitClaims, now: Int64, since: Int64) throws {
        try reloadIfStale(db)
        var logged: [(sender: Sender, runs: [Run])] = []
        logged.reserveCapacity(claims.senders.count)
        for (sender, senderClaims) in claims.senders where !senderClaims.list.isEmpty {
            let made = Self.runs(of: senderClaims.list, at: now)
            // The spans first (read with the unmerged runs on a miss), then this commit's runs.
            let index = try spansIndex(db, of: sender, since: since)
            for run in made { spans.values[index].record(run.first, run.last, at: now) }
            unmerged[sender, default: []].append(contentsOf: made)
            unmergedIDs += senderClaims.list.count
            logged.append((sender, made))
        }
        if now - mergedAt >= mergeInterval || unmergedIDs > 200_000 {
            try merge(db, now: now)   // this commit's runs included: no log row for them
        } else if !logged.isEmpty {
            let insert = try SQLiteFastStatement(db, sql: "INSERT INTO user_message_sent_log(runs, ts) VALUES (?, ?)")
            insert.bind(1, ResendRunCoding.encode(logged, at: now))
            insert.bind(2, now)
            try insert.run()
        }
        // Records older than the window go in one indexed delete, at most twice per window;
        // so do the spans of senders with nothing left in it.
        if pruning.isDue(resendsSince: since) {
            try db.execute(sql: "DELETE FROM user_message_sent_run WHERE ts < ?", arguments: [since])
            for sender in Array(spans.keys) where !spans[sender]!.forget(before: since) {
                spans[sender] = nil
            }
        }
        if spans.count > 100_000 { spans = [:] }   // bounded: read again as senders come back
    }

    /// A sender's claims (any order) as runs of consecutive client ids.
    static func runs(of claims: [(clientID: Int64, id: Int64)], at now: Int64) -> [Run] {
        // Usually ascending already (an SDK numbers its messages upwards).
        let ascending = zip(claims, claims.dropFirst()).allSatisfy { $0.clientID < $1.clientID }
        let sorted = ascending ? claims : claims.sorted { $0.clientID < $1.clientID }
        var runs: [Run] = []
        for claim in sorted {
            if let last = runs.last?.last, last < .max, claim.clientID == last + 1 {
                runs[runs.count - 1].ids.append(claim.id)
            } else {
                runs.append(Run(first: claim.clientID, ids: [claim.id], recordedAt: now))
            }
        }
        return runs
    }

    /// Moves the unmerged runs into the index, coalesced per sender, and empties the log.
    private mutating func merge(_ db: Database, now: Int64) throws {
        let insert = try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO user_message_sent_run(app, sender, first, last, ids, ts) VALUES (?, ?, ?, ?, ?, ?)
            """)
        for (sender, runs) in unmerged {
            for run in Self.coalesced(runs) {
                try insert.execute(arguments: [sender.appId, sender.userId, run.first, run.last, ResendRunCoding.encodeIDs(run.ids), run.recordedAt])
            }
        }
        try db.execute(sql: "DELETE FROM user_message_sent_log")
        unmerged = [:]
        unmergedIDs = 0
        mergedAt = now
    }

    /// Runs of one sender joined where one continues another.
    static func coalesced(_ runs: [Run]) -> [Run] {
        var result: [Run] = []
        for run in runs.sorted(by: { $0.first < $1.first }) {
            if let previous = result.last, previous.last < .max, previous.last + 1 == run.first {
                result[result.count - 1].ids.append(contentsOf: run.ids)
                result[result.count - 1].recordedAt = max(previous.recordedAt, run.recordedAt)
            } else {
                result.append(run)
            }
        }
        return result
    }

    /// After opening, or after a failed transaction: the log's runs are read back (and merged
    /// at the next record), the spans read again.
    private mutating func reloadIfStale(_ db: Database) throws {
        guard stale else { return }
        spans = [:]
        unmerged = [:]
        unmergedIDs = 0
        let rows = try Row.fetchCursor(db, sql: "SELECT runs FROM user_message_sent_log ORDER BY seq")
        while let row = try rows.next() {
            for (sender, runs) in try ResendRunCoding.decode(row["runs"]) {
                unmerged[sender, default: []].append(contentsOf: runs)
                unmergedIDs += runs.reduce(0) { $0 + $1.ids.count }
            }
        }
        mergedAt = 0   // merge them at the next record
        stale = false
    }

    /// Where a sender's spans are in `spans`: cached, or read (after a restart, or once
    /// forgotten) and cached. Valid until `spans` next changes.
    private mutating func spansIndex(_ db: Database, of sender: Sender, since: Int64) throws -> [Sender: ClientIDSpans].Index {
        if let lastSpans, lastSpans.sender == sender { return lastSpans.index }
        if spans.index(forKey: sender) == nil { spans[sender] = try readSpans(db, of: sender, since: since) }
        let index = spans.index(forKey: sender)!
        lastSpans = (sender, index)
        return index
    }

    /// A sender's spans from the index and the unmerged runs.
    private func readSpans(_ db: Database, of sender: Sender, since: Int64) throws -> ClientIDSpans {
        var spans = ClientIDSpans()
        let rows = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT first, last, ts FROM user_message_sent_run WHERE app = ? AND sender = ? AND ts >= ? ORDER BY first
            """), arguments: [sender.appId, sender.userId, since])
        while let row = try rows.next() {
            spans.record(row["first"], row["last"], at: row["ts"])
        }
        for run in unmerged[sender] ?? [] { spans.record(run.first, run.last, at: run.recordedAt) }
        return spans
    }
}

extension SQLiteResendRecords {
    /// One commit's client ids → store ids, per sender in first-seen order. A message costs one
    /// lookup of its sender (its slot); a resend within the commit is found by comparing ids.
    struct CommitClaims {
        private var slots: [Sender: Int] = [:]
        private(set) var senders: [(sender: Sender, claims: SenderClaims)] = []
        /// The slot asked for last: a sender's messages come in runs, looked up once per run.
        private var last: (sender: Sender, slot: Int)?

        /// The slot of `sender`, added if new.
        mutating func slot(of sender: Sender) -> Int {
            if let last, last.sender == sender { return last.slot }
            let slot: Int
            if let known = slots[sender] {
                slot = known
            } else {
                slot = senders.count
                slots[sender] = slot
                senders.append((sender, SenderClaims()))
            }
            last = (sender, slot)
            return slot
        }

        /// The store id this commit gave client id `clientID` of the sender in `slot`, if any.
        mutating func id(in slot: Int, of clientID: Int64) -> Int64? {
            senders[slot].claims.id(of: clientID)
        }

        /// The sender in `slot` stored client id `clientID` as `id`.
        mutating func claim(in slot: Int, _ clientID: Int64, id: Int64) {
            senders[slot].claims.add(clientID, id)
        }
    }

    /// One sender's claims in one commit, in the order made.
    struct SenderClaims {
        private(set) var list: [(clientID: Int64, id: Int64)] = []
        private var highest = Int64.min
        /// Built on the first id at or below `highest` (a resend, or ids out of order).
        private var index: [Int64: Int64]?

        mutating func id(of clientID: Int64) -> Int64? {
            guard !list.isEmpty, clientID <= highest else { return nil }   // above all: new
            if index == nil { index = Dictionary(list.lazy.map { ($0.clientID, $0.id) }, uniquingKeysWith: { first, _ in first }) }
            return index?[clientID]
        }

        mutating func add(_ clientID: Int64, _ id: Int64) {
            list.append((clientID, id))
            highest = max(highest, clientID)
            index?[clientID] = id
        }
    }
}
