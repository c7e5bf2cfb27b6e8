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
    struct Append: PostgresPreparedStatement {
        static let name = "rtm_log_append_v5"
        static let sql = """
            SELECT r_seq, r_epoch, r_resent FROM rtm_append($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[],
                $7::bool[], $8::text[], $9::bool[], $10::bool[], $11::bytea[], $12::int8[], $13::text, $14::int8)
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

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 14)
            bindings.append(apps); bindings.append(channels)
            bindings.append(rowApps); bindings.append(rowChannels); bindings.append(publishers)
            bindings.append(msgIds); bindings.append(hasMsgId); bindings.append(customTypes); bindings.append(hasCustomType)
            bindings.append(isText); bindings.append(payloads); bindings.append(millis)
            bindings.append(node); bindings.append(sinceMillis)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
    }
}
