import Logging
import PostgresNIO

/// The cluster's tables, created and migrated by the nodes themselves at start (`rtm serve
/// --postgres URL`): an ordered list of versioned migrations, each applied once in its own
/// transaction under an advisory lock, so that nodes starting together migrate once.
///
/// **Rolling upgrades.** Migrations add; the nodes of a release keep working against the
/// tables of a newer one (they ignore what they do not know), so a cluster is upgraded a node
/// at a time: the first node of the new release migrates, and a node of the older release
/// still starts (a restart, a crash) while the others are upgraded. A migration that older
/// nodes could not run against is listed in `breaking`: applying it records its version as
/// `schema_compatible_from` in `rtm_meta`, and a node whose schema is older than that refuses
/// to start, naming the release it needs.
public enum PostgresSchema {
    /// The migrations that nodes of an older release cannot run against (none so far).
    static let breaking: Set<Int> = []

    /// The migrations, in order; a migration's version is its index + 1. Never edit one that
    /// has shipped: append a new one.
    /// Each migration is a list of statements (the extended protocol runs one per query).
    static let migrations: [[String]] = [
        // 1: the channel message log (SPEC M-2 across nodes). One sequence per channel for the
        // whole cluster lives in `rtm_channel_seq` (row-locked while a publish transaction
        // holds it, so a channel's numbers are dense and committed in order). Log rows carry
        // the id of the transaction that wrote them (`xid`): readers follow the log by
        // (xid, pos) and read only below the oldest running transaction, so a row committed
        // late under an earlier position is never skipped (see `PostgresChannelLog`).
        ["""
        CREATE TABLE rtm_channel_seq (
            app text NOT NULL,
            channel text NOT NULL,
            epoch text NOT NULL,
            seq bigint NOT NULL,
            PRIMARY KEY (app, channel))
        """, """
        CREATE TABLE rtm_channel_log (
            pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
            app text NOT NULL,
            channel text NOT NULL,
            seq bigint NOT NULL,
            epoch text NOT NULL,
            publisher text NOT NULL,
            node text NOT NULL,
            msg_id bigint,
            custom_type text,
            is_text boolean NOT NULL,
            payload bytea NOT NULL,
            ts bigint NOT NULL)
        """,
         "CREATE INDEX rtm_channel_log_tail ON rtm_channel_log (xid, pos)",
         "CREATE INDEX rtm_channel_log_channel ON rtm_channel_log (app, channel, seq)",
         "CREATE INDEX rtm_channel_log_ts ON rtm_channel_log (ts)"],
        // 2: user messages (SPEC M-1 across nodes, `PostgresUserMessageStore`). Ids are per
        // receiver, from `rtm_user_seq` (row-locked by the committing transaction, so a
        // receiver's ids are dense and committed in order: a read that sees id n sees every
        // smaller id still stored). The epoch is the cluster's, made once here.
        ["""
        CREATE TABLE rtm_meta (key text PRIMARY KEY, value text NOT NULL)
        """,
         "INSERT INTO rtm_meta (key, value) VALUES ('user_epoch', 'pg' || to_hex((random() * 2^52)::int8))",
         """
        CREATE TABLE rtm_user_seq (
            app text NOT NULL,
            receiver text NOT NULL,
            seq bigint NOT NULL,
            PRIMARY KEY (app, receiver))
        """, """
        CREATE TABLE rtm_user_message (
            app text NOT NULL,
            receiver text NOT NULL,
            id bigint NOT NULL,
            sender text NOT NULL,
            text text,
            data bytea,
            custom_type text,
            ts bigint NOT NULL,
            PRIMARY KEY (app, receiver, id))
        """, """
        CREATE TABLE rtm_user_dropped (
            app text NOT NULL,
            receiver text NOT NULL,
            count bigint NOT NULL,
            PRIMARY KEY (app, receiver))
        """],
        // 3: node leases (`NodeRegistry`) and the last run of cluster-wide
        // periodic tasks (`ChannelLogRetention`: one node per period).
        ["""
        CREATE TABLE rtm_node (
            node_id text PRIMARY KEY,
            lease_until timestamptz NOT NULL,
            started_at timestamptz NOT NULL,
            host text NOT NULL)
        """, """
        CREATE TABLE rtm_maintenance (
            task text PRIMARY KEY,
            last_run timestamptz NOT NULL)
        """,
         "INSERT INTO rtm_maintenance (task, last_run) VALUES ('trim_channel_log', '-infinity')"],
        // 4: metadata, history and locks shared by the nodes (`PostgresServices`).
        // A metadata write holds a transaction-scoped advisory lock on its set (CAS
        // across nodes); history timestamps are unique per channel (the paging cursor); one
        // fencing-token sequence for the cluster; a lock's `due_at` is when it is released if
        // its owner does not come back (owner offline or its node dead, plus the TTL).
        ["""
        CREATE TABLE rtm_metadata (
            app text NOT NULL,
            type text NOT NULL,
            target text NOT NULL,
            major_revision bigint NOT NULL,
            body text NOT NULL,
            PRIMARY KEY (app, type, target))
        """, """
        CREATE TABLE rtm_history (
            app text NOT NULL,
            channel_type text NOT NULL,
            channel text NOT NULL,
            ts bigint NOT NULL,
            publisher text NOT NULL,
            text text,
            data bytea,
            custom_type text,
            dedup text,
            PRIMARY KEY (app, channel_type, channel, ts))
        """,
         "CREATE UNIQUE INDEX rtm_history_dedup ON rtm_history (app, channel_type, channel, dedup)",
         "CREATE INDEX rtm_history_ts ON rtm_history (ts)",
         "CREATE SEQUENCE rtm_lock_token",
         """
        CREATE TABLE rtm_lock (
            app text NOT NULL,
            channel text NOT NULL,
            name text NOT NULL,
            ttl integer NOT NULL,
            owner text,
            owner_node text,
            token bigint NOT NULL DEFAULT 0,
            due_at timestamptz,
            PRIMARY KEY (app, channel, name))
        """,
         "CREATE INDEX rtm_lock_owner ON rtm_lock (app, owner)",
         "CREATE INDEX rtm_lock_due ON rtm_lock (due_at) WHERE due_at IS NOT NULL"],
        // 5: the client message ids each sender used for user messages (SPEC M-3 across nodes
        // and restarts: a resend through any node is stored once).
        ["""
        CREATE TABLE rtm_user_sent (
            app text NOT NULL,
            sender text NOT NULL,
            client_msg_id bigint NOT NULL,
            id bigint,
            ts bigint NOT NULL,
            PRIMARY KEY (app, sender, client_msg_id))
        """,
         "CREATE INDEX rtm_user_sent_ts ON rtm_user_sent (ts)"],
        // 6: the database's history (`rtm_timeline()`, PostgreSQL's timeline: it changes when a
        // standby is promoted or a backup is restored). A promoted asynchronous standby may lack
        // the last commits of the old primary, so its counters can be behind numbers already
        // given out. Each channel counter remembers the timeline it last counted on: a channel's
        // first publish on a new timeline starts a new channel epoch at 1. A receiver's user
        // message ids on the n-th timeline after `user_timeline` are above n * 2^32, and the
        // messages carry a new mailbox epoch (`rtm_user_message.epoch`; NULL: `user_epoch`).
        // Log rows carry their timeline, so a follower whose cursor the new history reused can
        // find where to read again (`PostgresChannelLog.rewind`). No number ever names two
        // messages; what the old primary took with it is announced by the new epochs (SPEC
        // M-1, M-2).
        ["""
        CREATE FUNCTION rtm_timeline() RETURNS text LANGUAGE sql VOLATILE
        AS 'SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)'
        """,
         "ALTER TABLE rtm_channel_seq ADD COLUMN timeline text",
         "UPDATE rtm_channel_seq SET timeline = rtm_timeline()",
         "ALTER TABLE rtm_channel_log ADD COLUMN timeline text",
         "ALTER TABLE rtm_user_message ADD COLUMN epoch text",
         "INSERT INTO rtm_meta (key, value) VALUES ('user_timeline', rtm_timeline())"],
        // 7: fencing (`NodeRegistry`): a survivor declares a node dead by setting `fenced_at`
        // while the node's lease is lapsed; the node's renewals succeed only while it is NULL,
        // so a node paused or cut off past its lease learns it was declared dead before it
        // commits again. Nodes of the previous release ignore the column.
        ["ALTER TABLE rtm_node ADD COLUMN fenced_at timestamptz"],
        // 8: where each node answers `/health` ("host:port"): a node that cannot reach the
        // database asks the others whether they do, to tell being cut off from an outage of
        // the database itself (`NodeRegistry`). Nodes of the previous release leave it NULL.
        ["ALTER TABLE rtm_node ADD COLUMN address text"],
        // 9: resends recognised by the database (SPEC M-3 whatever a node has read): the
        // publishers' message ids in the log are indexed, and appends go through
        // `rtm_append` (`ChannelLogStatements.Append`). Nodes of the previous release append
        // with their own statement and ignore both (their resends are dropped when applied).
        ["CREATE INDEX IF NOT EXISTS rtm_channel_log_msg_id ON rtm_channel_log (app, publisher, msg_id) WHERE msg_id IS NOT NULL",
         """
        CREATE FUNCTION rtm_append(k_app text[], k_channel text[], i_app text[], i_channel text[], i_publisher text[],
                                   i_msg int8[], i_has_msg bool[], i_type text[], i_has_type bool[], i_text bool[],
                                   i_payload bytea[], i_ts int8[], writer text, since int8)
        RETURNS TABLE (r_seq int8, r_epoch text, r_resent bool) LANGUAGE plpgsql VOLATILE
        -- Planned once per connection (planning the statement at every call took as long as
        -- running it), often while the log is nearly empty, where a seq scan looks cheaper: the
        -- lookup must stay on the index however large the log grows.
        SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
        BEGIN
            -- Two nodes committing one publisher's message id at once take turns (a lock per
            -- publisher, taken in one order); the statement below takes its snapshot after the
            -- turn, so it sees the other's commit.
            PERFORM pg_advisory_xact_lock(7236815, h) FROM (
                SELECT DISTINCT hashtext(a || chr(10) || p) AS h
                FROM unnest(i_app, i_publisher, i_has_msg) AS u(a, p, x) WHERE x ORDER BY 1) AS turns;
            RETURN QUERY
            WITH tl AS MATERIALIZED (
                SELECT now.t, (SELECT value FROM rtm_meta WHERE key = 'user_epoch') || '.' || now.t AS e
                FROM (SELECT rtm_timeline() AS t) AS now
                WHERE NOT EXISTS (SELECT 1 FROM rtm_node WHERE node_id = writer AND fenced_at IS NOT NULL)),
            items AS (
                SELECT * FROM unnest(i_app, i_channel, i_publisher, i_msg, i_has_msg, i_type, i_has_type, i_text, i_payload, i_ts)
                     WITH ORDINALITY AS u(a, c, p, m, h, t, ht, x, b, ts, i)),
            prior AS (
                SELECT u.i, first.seq AS s, first.epoch AS e
                FROM items u CROSS JOIN LATERAL (
                    SELECT l.seq, l.epoch FROM rtm_channel_log l
                    WHERE l.app = u.a AND l.publisher = u.p AND l.msg_id = u.m AND l.msg_id IS NOT NULL AND l.ts >= since
                    ORDER BY l.xid, l.pos LIMIT 1) AS first
                WHERE u.h),
            marked AS (
                SELECT u.*, prior.s AS ps, prior.e AS pe,
                       CASE WHEN u.h THEN min(u.i) OVER (PARTITION BY u.a, u.p, CASE WHEN u.h THEN u.m END) ELSE u.i END AS fi
                FROM items u LEFT JOIN prior ON prior.i = u.i),
            fresh AS (SELECT * FROM marked WHERE ps IS NULL AND fi = i),
            keys AS (
                SELECT k.a, k.c, k.o, count(*) AS n
                FROM unnest(k_app, k_channel) WITH ORDINALITY AS k(a, c, o) JOIN fresh f ON f.a = k.a AND f.c = k.c
                GROUP BY k.a, k.c, k.o),
            bumped AS (
                INSERT INTO rtm_channel_seq AS s (app, channel, epoch, seq, timeline)
                SELECT k.a, k.c, tl.e, k.n, tl.t FROM keys k, tl ORDER BY k.o
                ON CONFLICT (app, channel) DO UPDATE SET
                    seq = CASE WHEN s.timeline IS NOT DISTINCT FROM EXCLUDED.timeline THEN s.seq + EXCLUDED.seq ELSE EXCLUDED.seq END,
                    epoch = CASE WHEN s.timeline IS NOT DISTINCT FROM EXCLUDED.timeline THEN s.epoch ELSE EXCLUDED.epoch END,
                    timeline = EXCLUDED.timeline
                RETURNING s.app, s.channel, s.epoch, s.seq),
            numbered AS (
                SELECT f.*, bumped.epoch AS e, bumped.seq - keys.n + row_number() OVER (PARTITION BY f.a, f.c ORDER BY f.i) AS s
                FROM fresh f JOIN keys ON keys.a = f.a AND keys.c = f.c
                             JOIN bumped ON bumped.app = f.a AND bumped.channel = f.c),
            inserted AS (
                INSERT INTO rtm_channel_log (app, channel, seq, epoch, publisher, node, msg_id, custom_type, is_text, payload, ts, timeline)
                SELECT a, c, s, e, p, writer, CASE WHEN h THEN m END, CASE WHEN ht THEN t END, x, b, ts, (SELECT t FROM tl)
                FROM numbered ORDER BY i)
            SELECT coalesce(mk.ps, n.s), coalesce(mk.pe, n.e), mk.ps IS NOT NULL OR mk.fi <> mk.i
            FROM marked mk LEFT JOIN numbered n ON n.i = mk.fi, tl
            ORDER BY mk.i;
        END
        $fn$
        """],
        // 10: appends that announce themselves in their own commit (`rtm_append_notify`,
        // `ChannelLogStatements.Append`): migration 9's `rtm_append` (its numbering, resend and
        // fencing rules), then the new messages' `NOTIFY`, one per notification channel
        // (`ChannelLogShards`), with the messages in `ChannelLogNotice`'s form (or empty when
        // they do not fit: a plain wake-up). PostgreSQL sends a transaction's notifications at
        // its commit, so the followers hear of a message as its writer does, without a second
        // statement and transaction per commit. Nodes of the previous release keep their own
        // statements.
        ["""
        -- A text in the notice's form: its length in 2 bytes, then its UTF-8. One expression, and
        -- STABLE as convert_to is, so that the planner inlines it (else it is a call per field).
        CREATE OR REPLACE FUNCTION rtm_notice_field(x text) RETURNS bytea LANGUAGE sql STABLE PARALLEL SAFE
        AS 'SELECT substring(int4send(octet_length(convert_to(x, ''UTF8''))) FROM 3 FOR 2) || convert_to(x, ''UTF8'')'
        """, """
        CREATE OR REPLACE FUNCTION rtm_append_notify(k_app text[], k_channel text[], i_app text[], i_channel text[], i_publisher text[],
                                          i_msg int8[], i_has_msg bool[], i_type text[], i_has_type bool[], i_text bool[],
                                          i_payload bytea[], i_ts int8[], writer text, since int8,
                                          i_notify text[], notice_bytes int4, notice_messages int4)
        RETURNS TABLE (r_seq int8, r_epoch text, r_resent bool) LANGUAGE plpgsql VOLATILE
        SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
        DECLARE
            announcing bool := cardinality(i_notify) = cardinality(i_app);
            j int := 0;
            k int;
            channels text[] := '{}';
            bodies bytea[] := '{}';
        BEGIN
            IF NOT announcing OR cardinality(i_app) > notice_messages THEN
                RETURN QUERY SELECT * FROM rtm_append(k_app, k_channel, i_app, i_channel, i_publisher, i_msg, i_has_msg, i_type,
                                                      i_has_type, i_text, i_payload, i_ts, writer, since);
                -- More than a notification can carry: a plain wake-up on each channel (none when
                -- fenced: nothing was stored). No channels given: announced by nobody.
                IF FOUND AND announcing THEN
                    PERFORM pg_notify(w.ch, '') FROM (SELECT DISTINCT ch FROM unnest(i_notify) AS ch) AS w;
                END IF;
                RETURN;
            END IF;
            -- Numbered and stored by migration 9's `rtm_append` (its rules, its locks; no rows
            -- when fenced), in item order; each new message (a resend was not stored) added to
            -- its notification channel's text. Simple expressions, no query per item.
            FOR r_seq, r_epoch, r_resent IN SELECT * FROM rtm_append(k_app, k_channel, i_app, i_channel, i_publisher, i_msg, i_has_msg,
                                                                     i_type, i_has_type, i_text, i_payload, i_ts, writer, since) LOOP
                j := j + 1;
                RETURN NEXT;
                CONTINUE WHEN r_resent;
                k := array_position(channels, i_notify[j]);
                IF k IS NULL THEN
                    channels := channels || i_notify[j];
                    bodies := bodies || ''::bytea;
                    k := cardinality(channels);
                END IF;
                bodies[k] := bodies[k] || rtm_notice_field(i_app[j]) || rtm_notice_field(i_channel[j]) || rtm_notice_field(r_epoch)
                    || rtm_notice_field(i_publisher[j]) || rtm_notice_field(writer) || int8send(r_seq) || int8send(i_ts[j])
                    || set_byte('\\x00'::bytea, 0, CASE WHEN i_has_msg[j] THEN 1 ELSE 0 END + CASE WHEN i_has_type[j] THEN 2 ELSE 0 END
                                                   + CASE WHEN i_text[j] THEN 4 ELSE 0 END)
                    || CASE WHEN i_has_msg[j] THEN int8send(i_msg[j]) ELSE ''::bytea END
                    || CASE WHEN i_has_type[j] THEN rtm_notice_field(i_type[j]) ELSE ''::bytea END
                    || int4send(octet_length(i_payload[j])) || i_payload[j];
            END LOOP;
            FOR k IN 1..cardinality(channels) LOOP
                PERFORM pg_notify(channels[k], CASE WHEN octet_length(bodies[k]) <= notice_bytes
                                                    THEN '1:' || translate(encode(bodies[k], 'base64'), E'\\n', '') ELSE '' END);
            END LOOP;
        END
        $fn$
        """],
    ]

    /// The version a fully migrated database has.
    public static var latestVersion: Int { migrations.count }

    /// Brings the database to `latestVersion`; safe to call from several nodes at once.
    /// Returns the versions it applied (empty when another node had done it).
    @discardableResult
    public static func migrate(_ client: PostgresClient, logger: Logger) async throws -> [Int] {
        try await client.transaction(Migration(), logger: logger)
    }

    /// The migration transaction (`migrate`).
    private struct Migration: PostgresTransaction {
        func run(on connection: PostgresConnection, logger: Logger) async throws -> [Int] {
            // One migrator at a time for the whole database (released at commit).
            try await connection.query("SELECT pg_advisory_xact_lock(7236815001)", logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS rtm_schema (
                    version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            var current = 0
            for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM rtm_schema", logger: logger)
                .decode(Int.self) { current = version }
            guard current <= latestVersion else {
                // A newer release migrated the database: fine unless one of its migrations
                // breaks older nodes (a rolling upgrade runs both releases for a while).
                var compatibleFrom = 0
                for try await value in try await connection.query(
                    "SELECT value FROM rtm_meta WHERE key = 'schema_compatible_from'", logger: logger).decode(String.self) {
                    compatibleFrom = Int(value) ?? Int.max
                }
                guard compatibleFrom <= latestVersion else {
                    throw PostgresSchemaError("the database is at schema version \(current) and needs a server of schema version \(compatibleFrom) or later; this server's is \(latestVersion): upgrade the server")
                }
                logger.warning("the database was migrated by a newer release: this node runs on the tables it knows; upgrade it",
                               metadata: ["database schema": "\(current)", "this node's schema": "\(latestVersion)"])
                return []
            }
            var applied: [Int] = []
            for version in (current + 1)..<(latestVersion + 1) {
                for statement in migrations[version - 1] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("INSERT INTO rtm_schema (version) VALUES (\(version))", logger: logger)
                if breaking.contains(version) {
                    try await connection.query("""
                        INSERT INTO rtm_meta (key, value) VALUES ('schema_compatible_from', \(String(version)))
                        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                        """, logger: logger)
                }
                applied.append(version)
            }
            if !applied.isEmpty { logger.info("database schema migrated", metadata: ["versions": "\(applied)"]) }
            return applied
        }
    }
}

/// The database's schema cannot be used by this server.
public struct PostgresSchemaError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
