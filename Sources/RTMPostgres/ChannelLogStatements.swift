import NIOCore
import PostgresNIO

/// The channel log's hot statements, prepared once per pooled connection.
///
/// Measured with `pg_stat_statements` under `rtm bench cluster --rate 1000`: each node reads the
/// log once per wake-up (about 2,000 reads/s over 3 nodes) and each publish is an append and a
/// `NOTIFY`; sent as unnamed statements, every one of them was parsed and planned again, and
/// the parsing, planning and protocol overhead cost PostgreSQL several times the statements'
/// own execution time. Prepared, each is parsed once per connection and runs on a cached plan.
enum ChannelLogStatements {
    /// Rows after a cursor whose transactions, and every older one, have ended
    /// (`PostgresChannelLog.read(after:)`).
    struct Read: PostgresPreparedStatement {
        static let name = "rtm_log_read_v2"
        static let sql = """
            SELECT xid::text AS xid_text, pos, app, channel, seq, epoch, publisher, node, msg_id, custom_type, is_text, payload, ts,
                   timeline
            FROM rtm_channel_log
            WHERE (xid, pos) > ($1::text::xid8, $2::int8)
              AND xid < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY xid, pos
            LIMIT $3::int8
            """
        typealias Row = PostgresRow

        var xid: String
        var pos: Int64
        var limit: Int64

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 3)
            bindings.append(xid)
            bindings.append(pos)
            bindings.append(limit)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
    }

    /// The wake-up sent after a commit. It commits with `synchronous_commit` off: it stores
    /// nothing (the rows it announces were flushed by their own commit), so waiting for a WAL
    /// flush would only delay every listener; a wake-up lost in a crash is covered by polling.
    struct Notify: PostgresPreparedStatement {
        static let name = "rtm_log_notify_v2"
        static let sql = "SELECT set_config('synchronous_commit', 'off', true), pg_notify('\(PostgresChannelLog.notificationChannel)', $1::text)"
        typealias Row = PostgresRow

        /// The messages just committed (`ChannelLogNotice`), or empty.
        var payload: String

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(payload)
            return bindings
        }
        func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
    }

    /// One batch of publishes in one statement (`PostgresChannelLog.append`): the channels'
    /// counters are bumped in the fixed order of the key arrays, each item gets its channel's
    /// numbers before the batch plus its rank among the batch's items of that channel, the rows
    /// are inserted, and the numbers come back in item order.
    ///
    /// A counter last bumped on another timeline (the database failed over to a standby that
    /// may lack the old primary's last numbers) starts again at 1 in a new epoch, so that no
    /// number is given to two messages (migration 6). A counter's epoch is the cluster's id and
    /// the timeline it starts on (`ChannelLogStart.firstEpoch`): every node knows it before the
    /// channel's first message.
    ///
    /// Fenced in the same statement: a node the others declared dead (its `rtm_node` row marked,
    /// `NodeRegistry`) appends nothing and gets no numbers back, even when it was paused between
    /// its lease check and this statement (`PostgresChannelLog.append` throws `NodeFenced`).
    struct Append: PostgresPreparedStatement {
        static let name = "rtm_log_append_v4"
        static let sql = """
            WITH tl AS MATERIALIZED (
                SELECT now.t, (SELECT value FROM rtm_meta WHERE key = 'user_epoch') || '.' || now.t AS e
                FROM (SELECT rtm_timeline() AS t) AS now
                WHERE NOT EXISTS (SELECT 1 FROM rtm_node WHERE node_id = $14::text AND fenced_at IS NOT NULL)),
            bumped AS (
                INSERT INTO rtm_channel_seq AS s (app, channel, epoch, seq, timeline)
                SELECT k.a, k.c, tl.e, k.n, tl.t FROM unnest($1::text[], $2::text[], $3::int8[]) AS k(a, c, n), tl
                ON CONFLICT (app, channel) DO UPDATE SET
                    seq = CASE WHEN s.timeline IS NOT DISTINCT FROM EXCLUDED.timeline THEN s.seq + EXCLUDED.seq ELSE EXCLUDED.seq END,
                    epoch = CASE WHEN s.timeline IS NOT DISTINCT FROM EXCLUDED.timeline THEN s.epoch ELSE EXCLUDED.epoch END,
                    timeline = EXCLUDED.timeline
                RETURNING app, channel, epoch, seq),
            keys AS (SELECT * FROM unnest($1::text[], $2::text[], $3::int8[]) AS k(a, c, n)),
            items AS (
                SELECT * FROM unnest($4::text[], $5::text[], $6::text[], $7::int8[], $8::bool[], $9::text[], $10::bool[],
                                     $11::bool[], $12::bytea[], $13::int8[])
                     WITH ORDINALITY AS u(a, c, p, m, h, t, ht, x, b, ts, i)),
            numbered AS (
                SELECT items.*, bumped.epoch AS e, bumped.seq - keys.n + row_number() OVER (PARTITION BY items.a, items.c ORDER BY items.i) AS s
                FROM items JOIN keys ON keys.a = items.a AND keys.c = items.c
                           JOIN bumped ON bumped.app = items.a AND bumped.channel = items.c),
            inserted AS (
                INSERT INTO rtm_channel_log (app, channel, seq, epoch, publisher, node, msg_id, custom_type, is_text, payload, ts, timeline)
                SELECT a, c, s, e, p, $14::text, CASE WHEN h THEN m END, CASE WHEN ht THEN t END, x, b, ts, (SELECT t FROM tl)
                FROM numbered ORDER BY i)
            SELECT s, e FROM numbered ORDER BY i
            """
        typealias Row = PostgresRow

        // The channels, in lock order.
        var apps: [String] = [], channels: [String] = [], adds: [Int64] = []
        // The items, in publish order.
        var rowApps: [String] = [], rowChannels: [String] = [], publishers: [String] = []
        var msgIds: [Int64] = [], hasMsgId: [Bool] = [], customTypes: [String] = [], hasCustomType: [Bool] = []
        var isText: [Bool] = [], payloads: [ByteBuffer] = [], millis: [Int64] = []
        var node: String

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 14)
            bindings.append(apps); bindings.append(channels); bindings.append(adds)
            bindings.append(rowApps); bindings.append(rowChannels); bindings.append(publishers)
            bindings.append(msgIds); bindings.append(hasMsgId); bindings.append(customTypes); bindings.append(hasCustomType)
            bindings.append(isText); bindings.append(payloads); bindings.append(millis)
            bindings.append(node)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
    }
}
