import Foundation
import Logging
import NIOCore
import PostgresNIO
import RTMServer

/// The channel message log in PostgreSQL: appends that give each channel one dense sequence for
/// the whole cluster, and reads that follow the log without ever skipping a row.
///
/// **Appends** (`append`): one statement per batch, committed on its own, however many
/// messages and channels it holds: it bumps the channels' counters in a fixed order (so two
/// nodes' batches never deadlock), inserts the rows and returns their numbers, in one round
/// trip. No `NOTIFY` inside it (it would take a database-wide lock at commit): `notify()` is a
/// separate, coalesced wake-up sent after the commit.
///
/// **Reads** (`read(after:)`): by (transaction id, position), and only below the oldest
/// transaction still running (`pg_snapshot_xmin`). Reading by an identity column alone skips
/// rows for ever when a transaction that took an earlier position commits after a later one
/// was read; here no row below the horizon can appear later, and a row above it is read once
/// its transaction and every older one have ended. The cost: a long-running transaction on the
/// same PostgreSQL server holds the horizon back, and with it every node's deliveries.
public struct PostgresChannelLog: Sendable {
    /// The `LISTEN`/`NOTIFY` channel that wakes followers.
    public static let notificationChannel = "rtm_log"

    private let client: PostgresClient
    private let logger: Logger
    /// The longest any call waits for the database (`BoundedCall`).
    private let callTimeout: TimeAmount
    /// How far back an append looks for a resend's first copy (SPEC M-3).
    private let resendWindow: TimeAmount

    /// `callTimeout`: the longest any call waits for the database before it fails (default 5 s).
    /// `resendWindow`: a message id published again within it is a resend (default 60 s, as
    /// `PostgresBackplaneOptions.resendWindow`).
    public init(client: PostgresClient, callTimeout: TimeAmount = .seconds(5), resendWindow: TimeAmount = .seconds(60), logger: Logger) {
        self.client = client
        self.callTimeout = callTimeout
        self.resendWindow = resendWindow
        self.logger = logger
    }

    /// Wall-clock milliseconds since 1970, `amount` ago (a resend window's start).
    private static func wallMillis(ago amount: TimeAmount) -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1000) - amount.nanoseconds / 1_000_000
    }

    /// `body` under this log's deadline (`BoundedCall`).
    private func bounded<T: Sendable>(_ operation: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await BoundedCall.run(operation, timeout: callTimeout, body)
    }

    /// Appends `items` in one statement (one transaction) and returns each one's sequence number and epoch, in
    /// the order given. `node` names the writer. A channel's first message (and its first on a
    /// new timeline) starts its epoch: `ChannelLogStart.firstEpoch`. An item whose publisher's
    /// message id was committed within the resend window (by any node, or earlier in `items`)
    /// is not stored again: its receipt is the first copy's, marked `resent` (SPEC M-3).
    ///
    /// With `announce`, the new messages are announced to the followers in the same transaction
    /// (`NOTIFY` on each one's notification channel, `ChannelLogShards`, carrying them when they
    /// fit `ChannelLogNotice`): they hear of them at the commit. Without (a writer that never
    /// notifies, as a node dying at its commit would), followers find them when they read.
    public func append(_ items: [ChannelLogAppend], node: String, announce: Bool = false) async throws -> [ChannelLogReceipt] {
        guard !items.isEmpty else { return [] }
        // A fixed lock order for every writer.
        let keys = Set(items.lazy.map { ChannelLogKey(appId: $0.appId, channel: $0.channel) })
            .sorted { ($0.appId, $0.channel) < ($1.appId, $1.channel) }
        var statement = ChannelLogStatements.Append(node: node, sinceMillis: Self.wallMillis(ago: resendWindow))
        statement.apps = keys.map(\.appId)
        statement.channels = keys.map(\.channel)
        for item in items {
            statement.rowApps.append(item.appId); statement.rowChannels.append(item.channel); statement.publishers.append(item.publisher)
            statement.msgIds.append(Int64(bitPattern: item.msgId ?? 0)); statement.hasMsgId.append(item.msgId != nil)
            statement.customTypes.append(item.customType ?? ""); statement.hasCustomType.append(item.customType != nil)
            statement.isText.append(item.isText); statement.payloads.append(item.payload); statement.millis.append(item.millis)
        }
        if announce {
            var last: (key: ChannelLogKey, name: String)?
            statement.notify = items.map { item in
                let key = ChannelLogKey(appId: item.appId, channel: item.channel)
                if let last, last.key == key { return last.name }
                let name = ChannelLogShards.notificationChannel(for: key)
                last = (key, name)
                return name
            }
        }
        // Everything in one prepared statement, committed on its own (one round trip, where a
        // BEGIN / bump / insert / COMMIT transaction took four).
        let ready = statement
        let receipts = try await bounded("an append") { [self] in
            var receipts: [ChannelLogReceipt] = []
            receipts.reserveCapacity(items.count)
            for try await row in try await client.execute(ready, logger: logger) {
                let cells = row.makeRandomAccess()
                receipts.append(ChannelLogReceipt(seq: try cells[0].decode(Int64.self), epoch: try cells[1].decode(String.self),
                                                  resent: try cells[2].decode(Bool.self)))
            }
            return receipts
        }
        // No numbers at all: this node's row is marked dead (the statement's fence).
        if receipts.isEmpty { throw NodeFenced() }   // (`items` is not empty: see the guard above)
        guard receipts.count == items.count else {
            throw PostgresChannelLogError("an append returned \(receipts.count) numbers for \(items.count) messages")
        }
        return receipts
    }

    /// Where a new follower starts: the horizon now, each channel's number, epoch and timeline
    /// as committed in the same snapshot (rows at or below are already counted; rows above are
    /// read), and the database's timeline.
    /// With `resendWindow`, also the message ids published in that last window, the last
    /// `resendMemory` per publisher, in log order (`ChannelLogStart.recentIds`).
    public func startPosition(resendWindow: TimeAmount = .zero, resendMemory: Int = 1024) async throws -> ChannelLogStart {
        let read = ReadStart(sinceMillis: Self.wallMillis(ago: resendWindow),
                             resendMemory: resendWindow > .zero ? resendMemory : 0)
        return try await bounded("the start position") { [self] in try await client.transaction(read, logger: logger) }
    }

    /// The start position's snapshot (`startPosition`).
    private struct ReadStart: PostgresTransaction {
        static var begin: PostgresQuery { "BEGIN ISOLATION LEVEL REPEATABLE READ" }
        let sinceMillis: Int64
        let resendMemory: Int

        func run(on connection: PostgresConnection, logger: Logger) async throws -> ChannelLogStart {
            var horizon: UInt64 = 0
            var timeline = "", cluster = ""
            for try await (text, current, id) in try await connection.query(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text, rtm_timeline(), (SELECT value FROM rtm_meta WHERE key = 'user_epoch')",
                logger: logger).decode((String, String, String).self) {
                horizon = UInt64(text) ?? 0
                timeline = current
                cluster = id
            }
            var start = ChannelLogStart(cursor: ChannelLogCursor(xid: horizon, pos: 0), timeline: timeline, cluster: cluster)
            for try await (app, channel, seq, epoch, rowTimeline) in try await connection.query(
                "SELECT app, channel, seq, epoch, timeline FROM rtm_channel_seq", logger: logger)
                .decode((String, String, Int64, String, String?).self) {
                let key = ChannelLogKey(appId: app, channel: channel)
                start.applied[key] = seq
                start.epochs[key] = ChannelLogOrdering.Epoch(epoch: epoch, timeline: rowTimeline ?? "")
            }
            guard resendMemory > 0 else { return start }
            // By the ts index; per publisher only the newest `resendMemory`, oldest first.
            for try await (app, publisher, msgId, seq) in try await connection.query("""
                SELECT app, publisher, msg_id, seq FROM (
                    SELECT app, publisher, msg_id, seq, xid, pos,
                           row_number() OVER (PARTITION BY app, publisher ORDER BY xid DESC, pos DESC) AS newest
                    FROM rtm_channel_log WHERE ts >= \(sinceMillis) AND msg_id IS NOT NULL) AS recent
                WHERE newest <= \(resendMemory) ORDER BY xid, pos
                """, logger: logger).decode((String, String, Int64, Int64).self) {
                start.recentIds.append(ChannelLogStart.RecentId(appId: app, publisher: publisher, msgId: UInt64(bitPattern: msgId), seq: seq))
            }
            return start
        }
    }

    /// The database's timeline now (`rtm_timeline()`): it changes when a standby is promoted.
    public func timeline() async throws -> String {
        try await bounded("the timeline") { [self] in
            var timeline = ""
            for try await current in try await client.query("SELECT rtm_timeline()", logger: logger).decode(String.self) { timeline = current }
            return timeline
        }
    }

    /// Where a follower must read again after the database moved to a new timeline: the last
    /// row at or before `cursor` written on `timeline` (the one the follower read on) or
    /// earlier. A promoted standby gives out again the transaction ids and positions of the old
    /// primary's lost tail, so the new history's first rows can sit below a cursor that was
    /// advanced on the old one; they all come after the last row of the old history it kept
    /// (a new timeline's transaction ids follow every id it replayed).
    public func rewind(_ cursor: ChannelLogCursor, timeline: String) async throws -> ChannelLogCursor {
        try await bounded("a rewind") { [self] in
            var position = ChannelLogCursor(xid: 0, pos: 0)
            for try await (xid, pos) in try await client.query("""
                SELECT xid::text, pos FROM rtm_channel_log
                WHERE (xid, pos) <= (\(String(cursor.xid))::text::xid8, \(cursor.pos)) AND (timeline IS NULL OR timeline <= \(timeline))
                ORDER BY xid DESC, pos DESC LIMIT 1
                """, logger: logger).decode((String, Int64).self) {
                position = ChannelLogCursor(xid: UInt64(xid) ?? 0, pos: pos)
            }
            return position
        }
    }

    /// Up to `limit` rows after `cursor` whose transactions, and every older one, have ended;
    /// and the cursor after them: after the last row, or at the horizon when fewer than `limit`
    /// came (every older row was passed over; unchanged when none ended). `following`: only these
    /// data channels' rows (and always the cluster's own channels, `ChannelLogShards`); nil:
    /// every channel's.
    public func read(after cursor: ChannelLogCursor, following: Set<ChannelLogKey>? = nil,
                     limit: Int = 5_000) async throws -> (entries: [ChannelLogEntry], cursor: ChannelLogCursor) {
        try await bounded("a log read") { [self] in try await readRows(after: cursor, following: following, limit: limit) }
    }

    private func readRows(after cursor: ChannelLogCursor, following: Set<ChannelLogKey>?,
                          limit: Int) async throws -> (entries: [ChannelLogEntry], cursor: ChannelLogCursor) {
        var statement = ChannelLogStatements.Read(xid: String(cursor.xid), pos: cursor.pos, limit: Int64(limit))
        statement.everyChannel = following == nil
        if let following {
            statement.apps.reserveCapacity(following.count)
            statement.channels.reserveCapacity(following.count)
            for key in following {
                statement.apps.append(key.appId)
                statement.channels.append(key.channel)
            }
        }
        let rows = try await client.execute(statement, logger: logger)
        var entries: [ChannelLogEntry] = []
        var position = cursor
        // Cell by cell: decoding each row as one 13-element tuple made the runtime look up the
        // tuple's type metadata (a lock and a hash) for every row, a third of a node's time
        // when following 50,000 messages a second.
        var lastXid: String?
        var horizon: String?
        for try await row in rows {
            let cells = row.makeRandomAccess()
            horizon = try cells[14].decode(String?.self)
            guard let xid = try cells[0].decode(String?.self) else { continue }   // none: the horizon alone
            lastXid = xid
            let msgId = try cells[8].decode(Int64?.self)
            entries.append(ChannelLogEntry(appId: try cells[2].decode(String.self), channel: try cells[3].decode(String.self),
                                           seq: try cells[4].decode(Int64.self), epoch: try cells[5].decode(String.self),
                                           publisher: try cells[6].decode(String.self), node: try cells[7].decode(String.self),
                                           msgId: msgId.map { UInt64(bitPattern: $0) }, customType: try cells[9].decode(String?.self),
                                           isText: try cells[10].decode(Bool.self), payload: try cells[11].decode(ByteBuffer.self),
                                           millis: try cells[12].decode(Int64.self), timeline: try cells[13].decode(String?.self)))
            position.pos = try cells[1].decode(Int64.self)
        }
        if let lastXid { position.xid = UInt64(lastXid) ?? position.xid }
        // Fewer rows than asked for: every row below the horizon has been passed over (those of
        // channels not followed too), so the next read starts there. Positions are above 0.
        if entries.count < limit, let horizon, let xmin = UInt64(horizon) {
            let passed = ChannelLogCursor(xid: xmin, pos: 0)
            if passed > position { position = passed }
        }
        return (entries, position)
    }

    /// Where each of `keys` stands as committed now: its counter's number, epoch and timeline.
    /// A channel without messages has none.
    public func positions(of keys: [ChannelLogKey]) async throws -> [ChannelLogKey: (seq: Int64, epoch: ChannelLogOrdering.Epoch)] {
        guard !keys.isEmpty else { return [:] }
        let apps = keys.map(\.appId), channels = keys.map(\.channel)
        return try await bounded("the channels' positions") { [self] in
            var positions: [ChannelLogKey: (seq: Int64, epoch: ChannelLogOrdering.Epoch)] = [:]
            for try await (app, channel, seq, epoch, timeline) in try await client.query("""
                SELECT s.app, s.channel, s.seq, s.epoch, s.timeline FROM rtm_channel_seq s
                JOIN unnest(\(apps)::text[], \(channels)::text[]) AS f(app, channel) ON s.app = f.app AND s.channel = f.channel
                """, logger: logger).decode((String, String, Int64, String, String?).self) {
                positions[ChannelLogKey(appId: app, channel: channel)] = (seq, ChannelLogOrdering.Epoch(epoch: epoch, timeline: timeline ?? ""))
            }
            return positions
        }
    }

    /// A channel's messages after `seq` (replay and history from any node), oldest first.
    public func messages(appId: String, channel: String, after seq: Int64, limit: Int) async throws -> [ChannelLogEntry] {
        try await bounded("a channel's messages") { [self] in try await fetchMessages(appId: appId, channel: channel, after: seq, limit: limit) }
    }

    /// A channel's messages committed at or after `sinceMillis`, in the log's order (a
    /// control channel's recent history: `ChannelBackplane.controlHistory`).
    public func recent(appId: String, channel: String, sinceMillis: Int64) async throws -> [ChannelLogEntry] {
        try await bounded("a channel's recent messages") { [self] in
            let rows = try await client.query("""
                SELECT seq, epoch, publisher, node, msg_id, custom_type, is_text, payload, ts FROM rtm_channel_log
                WHERE app = \(appId) AND channel = \(channel) AND ts >= \(sinceMillis)
                ORDER BY xid, pos
                """, logger: logger)
            return try await entries(rows, appId: appId, channel: channel)
        }
    }

    private func fetchMessages(appId: String, channel: String, after seq: Int64, limit: Int) async throws -> [ChannelLogEntry] {
        let rows = try await client.query("""
            SELECT seq, epoch, publisher, node, msg_id, custom_type, is_text, payload, ts FROM rtm_channel_log
            WHERE app = \(appId) AND channel = \(channel) AND seq > \(seq)
            ORDER BY seq LIMIT \(limit)
            """, logger: logger)
        return try await entries(rows, appId: appId, channel: channel)
    }

    private func entries(_ rows: PostgresRowSequence, appId: String, channel: String) async throws -> [ChannelLogEntry] {
        var entries: [ChannelLogEntry] = []
        typealias Row = (Int64, String, String, String, Int64?, String?, Bool, ByteBuffer, Int64)
        for try await (seq, epoch, publisher, node, msgId, customType, isText, payload, millis) in rows.decode(Row.self) {
            entries.append(ChannelLogEntry(appId: appId, channel: channel, seq: seq, epoch: epoch, publisher: publisher, node: node,
                                           msgId: msgId.map { UInt64(bitPattern: $0) }, customType: customType, isText: isText,
                                           payload: payload, millis: millis))
        }
        return entries
    }
}

/// Where a follower starts reading the log (`PostgresChannelLog.startPosition`).
public struct ChannelLogStart: Sendable {
    /// The first position to read after.
    public var cursor: ChannelLogCursor
    /// Each channel's number as committed at the start.
    public var applied: [ChannelLogKey: Int64] = [:]
    /// Each channel's epoch and the timeline it was counted on.
    public var epochs: [ChannelLogKey: ChannelLogOrdering.Epoch] = [:]
    /// The database's timeline at the start.
    public var timeline: String
    /// The cluster's id (made once, when the schema was created).
    public var cluster: String
    /// Message ids published in the resend window before the start, in log order
    /// (`PostgresChannelLog.startPosition(resendWindow:)`).
    public var recentIds: [RecentId] = []

    /// A publisher's message id and the number its message got.
    public struct RecentId: Sendable, Equatable {
        public var appId: String
        public var publisher: String
        public var msgId: UInt64
        public var seq: Int64
    }

    /// The epoch a channel's first message gets on `timeline` (and a channel's first message
    /// after the database moved to `timeline`): the same on every node, so that a node can
    /// answer a subscribe to a channel with no message yet with the epoch its messages will
    /// carry (SPEC M-2). The append statement makes the same string (`ChannelLogStatements.Append`).
    public static func firstEpoch(cluster: String, timeline: String) -> String { "\(cluster).\(timeline)" }
}

/// The channel log answered something impossible.
public struct PostgresChannelLogError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
