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
        static let name = "rtm_log_read_v3"
        /// The rows of the channels followed ($4, $5: apps and names; app "" and names starting
        /// with '/' always; every channel's with $6), and the horizon (the last column, on
        /// every row; a row of nulls but for it when there are none): every row below it has
        /// been passed over, followed or not, so the cursor moves there and the next read does
        /// not scan again what this one passed over.
        static let sql = """
            WITH horizon AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
            SELECT r.xid_text, r.pos, r.app, r.channel, r.seq, r.epoch, r.publisher, r.node, r.msg_id, r.custom_type, r.is_text,
                   r.payload, r.ts, r.timeline, h.xmin::text
            FROM horizon h LEFT JOIN LATERAL (
                SELECT xid::text AS xid_text, pos, app, channel, seq, epoch, publisher, node, msg_id, custom_type, is_text, payload, ts,
                       timeline
                FROM rtm_channel_log
                WHERE (xid, pos) > ($1::text::xid8, $2::int8)
                  AND xid < h.xmin
                  AND ($6::bool OR app = '' OR starts_with(channel, '/')
                       OR (app, channel) IN (SELECT f.app, f.channel FROM unnest($4::text[], $5::text[]) AS f(app, channel)))
                ORDER BY xid, pos
                LIMIT $3::int8) r ON true
            """
        typealias Row = PostgresRow

        var xid: String
        var pos: Int64
        var limit: Int64
        /// The data channels followed.
        var apps: [String] = []
        var channels: [String] = []
        /// Every channel's rows (`apps` and `channels` are not looked at).
        var everyChannel = false

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 6)
            bindings.append(xid)
            bindings.append(pos)
            bindings.append(limit)
            bindings.append(apps)
            bindings.append(channels)
            bindings.append(everyChannel)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
    }

    /// One batch of publishes in one statement (`PostgresChannelLog.append`), through the
    /// `rtm_append` function (migration 9, `PostgresSchema`): the channels' counters are bumped
    /// in the fixed order of the key arrays, each new item gets its channel's numbers before
    /// the batch plus its rank among the batch's new items of that channel, the rows are
    /// inserted, and the numbers come back in item order.
    ///
    /// Resends (SPEC M-3, whatever this node has read): an item whose publisher's message id
    /// is in the log already, committed within the resend window (`since`), by any node, or
    /// earlier in the same batch, is not stored again: it gets the first copy's number and
    /// epoch back, marked resent. Two nodes committing one publisher's id at once take turns
    /// on a per-publisher lock, and the second sees the first's row.
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
    ///
    /// Announced in the same transaction (`rtm_append_notify`, migration 10), when `notify`
    /// names each item's notification channel: one `NOTIFY` per channel with its new messages
    /// in `ChannelLogNotice`'s form, built by the database from the numbers it gave (or empty
    /// when they do not fit: the followers read), sent by PostgreSQL at the commit.
    struct Append: PostgresPreparedStatement {
        static let name = "rtm_log_append_v6"
        static let sql = """
            SELECT r_seq, r_epoch, r_resent FROM rtm_append_notify($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[],
                $7::bool[], $8::text[], $9::bool[], $10::bool[], $11::bytea[], $12::int8[], $13::text, $14::int8, $15::text[], $16::int4,
                $17::int4)
            """
        typealias Row = PostgresRow

        // The channels, in lock order.
        var apps: [String] = [], channels: [String] = []
        // The items, in publish order.
        var rowApps: [String] = [], rowChannels: [String] = [], publishers: [String] = []
        var msgIds: [Int64] = [], hasMsgId: [Bool] = [], customTypes: [String] = [], hasCustomType: [Bool] = []
        var isText: [Bool] = [], payloads: [ByteBuffer] = [], millis: [Int64] = []
        var node: String
        /// The oldest publish time a resend's first copy can have (the resend window's start).
        var sinceMillis: Int64
        /// Each item's notification channel (`ChannelLogShards`); empty: no `NOTIFY`.
        var notify: [String] = []

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 17)
            bindings.append(apps); bindings.append(channels)
            bindings.append(rowApps); bindings.append(rowChannels); bindings.append(publishers)
            bindings.append(msgIds); bindings.append(hasMsgId); bindings.append(customTypes); bindings.append(hasCustomType)
            bindings.append(isText); bindings.append(payloads); bindings.append(millis)
            bindings.append(node); bindings.append(sinceMillis)
            bindings.append(notify); bindings.append(Int32(ChannelLogNotice.rawLimit)); bindings.append(Int32(ChannelLogNotice.maxMessages))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
    }
}
