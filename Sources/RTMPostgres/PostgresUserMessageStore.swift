import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import RTMServer

/// The cluster's user-message store (`rtm serve --postgres URL`): the same semantics
/// as the embedded SQLite store (SPEC M-1: committed before the sender's reply, read at the
/// receiver's login, deleted on its ack, a cap and a maximum age per receiver, dropped counts),
/// in tables every node shares, so a message sent on one node reaches its receiver on another.
///
/// **Ids** are per receiver (`rtm_user_seq`, row-locked by the committing transaction): dense
/// and committed in order, so a read that sees a receiver's id n sees every smaller id still
/// stored, and the receiver's SDK (which drops an id at or below the last it saw) never drops
/// a new one. The epoch is the database's, the same on every node. After a failover to a
/// standby (a new PostgreSQL timeline) the ids jump above n * 2^32 and the messages carry a new
/// mailbox epoch (migration 6): the standby may lack ids the old primary gave out.
///
/// **Cross-node wake-up**: after each commit the node sends `NOTIFY rtm_user` naming the
/// receivers (JSON, under 8000 bytes; an empty list means "any"); every node `LISTEN`s on a
/// dedicated connection and also polls every `pollInterval` (a notification is only a wake-up).
///
/// **Its thread**: the mailbox makes every call on the store's own thread (`thread`, never an
/// event loop), one at a time; each runs postgres-nio's async API in a task and blocks that
/// thread until it ends (at most `callTimeout`).
public final class PostgresUserMessageStore: UserMessageStore {
    /// The `LISTEN`/`NOTIFY` channel of user-message commits.
    public static let notificationChannel = "rtm_user"

    public let epoch: String
    /// See `UserMessageStore.thread`.
    public let thread = StoreThread(label: "rtm.user-store.postgres")
    /// This node's name (its own notifications are ignored).
    public let node: String
    private let client: PostgresClient
    private let listener: PostgresListener
    private let pollInterval: TimeAmount
    private let retryInterval: TimeAmount
    private let callTimeout: TimeAmount
    private let logger: Logger
    private let tasks: NIOLockedValueBox<[Task<Void, Never>]>
    /// When this node drops old records of client message ids.
    private let pruning = NIOLockedValueBox(ResendRecordPruning())

    /// What a notification carries.
    private struct Notice: Codable {
        /// The committing node.
        var n: String
        /// [app, user] pairs; empty: any receiver.
        var r: [[String]]
    }

    /// Opens the store: starts a pool of `poolSize` connections, migrates the schema and reads
    /// the epoch.
    /// - Parameters:
    ///   - pollInterval: the fallback check for other nodes' commits (default 500 ms).
    ///   - callTimeout: the longest a store call waits for the database (default 10 s).
    ///   - listener: the node's shared listening connection; nil: a connection of the store's own.
    public static func open(location: PostgresLocation, node: String, poolSize: Int = 4, pollInterval: TimeAmount = .milliseconds(500),
                            retryInterval: TimeAmount = .seconds(1), callTimeout: TimeAmount = .seconds(10),
                            listener: PostgresListener? = nil, logger: Logger) async throws -> PostgresUserMessageStore {
        let client = PostgresClient(configuration: location.clientConfiguration(connections: poolSize), backgroundLogger: logger)
        let running = Task { await client.run() }
        do {
            try await PostgresSchema.migrate(client, logger: logger)
            var epoch = ""
            for try await value in try await client.query("SELECT value FROM rtm_meta WHERE key = 'user_epoch'", logger: logger)
                .decode(String.self) { epoch = value }
            return PostgresUserMessageStore(client: client, running: running, epoch: epoch,
                                            listener: listener ?? PostgresListener(location: location), node: node,
                                            pollInterval: pollInterval, retryInterval: retryInterval, callTimeout: callTimeout, logger: logger)
        } catch {
            running.cancel()
            await running.value
            throw error
        }
    }

    private init(client: PostgresClient, running: Task<Void, Never>, epoch: String, listener: PostgresListener,
                 node: String, pollInterval: TimeAmount, retryInterval: TimeAmount, callTimeout: TimeAmount, logger: Logger) {
        self.client = client
        self.tasks = NIOLockedValueBox([running])
        self.epoch = epoch
        self.listener = listener
        self.node = node
        self.pollInterval = pollInterval
        self.retryInterval = retryInterval
        self.callTimeout = callTimeout
        self.logger = logger
    }

    // MARK: UserMessageStore

    public func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                       resendsSince: Int64) throws -> [CommittedUserMessage] {
        try commit(messages, acknowledgements: acknowledgements, cap: cap, resendsSince: resendsSince, before: .now() + callTimeout)
    }

    /// `commit`, waiting at most until `due` (and never longer than `callTimeout`).
    public func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                       resendsSince: Int64, before due: NIODeadline) throws -> [CommittedUserMessage] {
        let acks = acknowledgements.map { (UserMessageReceiver(appId: $0.appId, userId: $0.receiver), $0.upTo) }
        // Records of used client message ids older than the window go at most twice per window
        // (each node prunes; the deletes are idempotent).
        let prune = pruning.withLockedValue { $0.isDue(resendsSince: resendsSince) }
        let work = Commit(messages: messages, acks: acks, cap: cap, resendsSince: resendsSince, prune: prune)
        let timeout = min(callTimeout, max(.milliseconds(1), due - .now()))
        let results = try blockingCall(timeout: timeout) { [client, logger] in try await client.transaction(work, logger: logger) }
        let stored = zip(messages, results).filter { !$0.1.isResend }.map(\.0)
        if !stored.isEmpty { notify(Set(stored.map { UserMessageReceiver(appId: $0.appId, userId: $0.receiver) })) }
        return results
    }

    /// A commit that failed may still have committed (the database did not answer in time, the
    /// link broke): the sender is told the outcome is unknown, and its resend with the same
    /// msgId is recognised (M-3).
    public func refusalReason(for error: any Error) -> String {
        ClusterCommitFailure.reason(error)
    }

    /// One commit's transaction (`commit`).
    private struct Commit: PostgresTransaction {
        let messages: [StoredUserMessage]
        let acks: [(UserMessageReceiver, Int64)]
        let cap: Int
        let resendsSince: Int64
        let prune: Bool

        func run(on connection: PostgresConnection, logger: Logger) async throws -> [CommittedUserMessage] {
            if prune { try await connection.query("DELETE FROM rtm_user_sent WHERE ts < \(resendsSince)", logger: logger) }
            let resends = try await PostgresUserMessageStore.claimClientIDs(messages, resendsSince: resendsSince, on: connection, logger: logger)
            let fresh = messages.indices.filter { resends[$0] == nil }
            let (ids, epoch) = try await PostgresUserMessageStore.commit(fresh.map { messages[$0] }, acks: acks, cap: cap,
                                                                         on: connection, logger: logger)
            try await PostgresUserMessageStore.recordClientIDs(zip(fresh, ids).compactMap { index, id in
                messages[index].clientMsgId.map { (messages[index], $0, id) }
            }, on: connection, logger: logger)
            var results = [CommittedUserMessage](repeating: CommittedUserMessage(id: 0), count: messages.count)
            for (index, id) in zip(fresh, ids) { results[index] = CommittedUserMessage(id: id, epoch: epoch, previous: id - 1) }   // dense per receiver
            for (index, first) in resends {
                // A resend of one earlier in this batch has its id only now.
                let id = first.inBatch.map { results[$0].id } ?? first.id
                results[index] = CommittedUserMessage(id: id, isResend: true)
            }
            return results
        }
    }

    /// Where a resend's first attempt is: earlier in the same batch, or stored with `id`.
    private struct FirstAttempt: Sendable {
        var inBatch: Int?
        var id: Int64 = 0
    }

    /// Claims the client message ids of `messages` (SPEC M-3): a message whose sender already
    /// used its id (stored at or after `resendsSince`, in this batch, or committed by any node)
    /// is a resend. The claims are rows of `rtm_user_sent` under its primary key, inserted in one
    /// order by every node, so of two attempts committed at once the second waits for the
    /// first and then sees it; each is dated when it is stored (now, by this node's clock, as
    /// `resendsSince` is), not by its message's timestamp. Returns the resends by index.
    private static func claimClientIDs(_ messages: [StoredUserMessage], resendsSince: Int64,
                                       on connection: PostgresConnection, logger: Logger) async throws -> [Int: FirstAttempt] {
        struct Key: Hashable { let app: String, sender: String, id: Int64 }
        var first: [Key: Int] = [:]
        var resends: [Int: FirstAttempt] = [:]
        for (index, message) in messages.enumerated() {
            guard let clientMsgId = message.clientMsgId else { continue }
            let key = Key(app: message.appId, sender: message.sender, id: Int64(bitPattern: clientMsgId))
            if let earlier = first[key] { resends[index] = FirstAttempt(inBatch: earlier) } else { first[key] = index }
        }
        guard !first.isEmpty else { return resends }
        let keys = first.keys.sorted { ($0.app, $0.sender, $0.id) < ($1.app, $1.sender, $1.id) }
        let apps = keys.map(\.app), senders = keys.map(\.sender), ids = keys.map(\.id)
        let storedAt = Int64(Date().timeIntervalSince1970 * 1000)
        let stamps = [Int64](repeating: storedAt, count: keys.count)
        var claimed: Set<Key> = []
        // A record older than the window is taken over (the id is new again).
        for try await (app, sender, id) in try await connection.query("""
            INSERT INTO rtm_user_sent AS s (app, sender, client_msg_id, ts)
            SELECT * FROM unnest(\(apps)::text[], \(senders)::text[], \(ids)::int8[], \(stamps)::int8[])
            ON CONFLICT (app, sender, client_msg_id) DO UPDATE SET ts = EXCLUDED.ts, id = NULL WHERE s.ts < \(resendsSince)
            RETURNING app, sender, client_msg_id
            """, logger: logger).decode((String, String, Int64).self) {
            claimed.insert(Key(app: app, sender: sender, id: id))
        }
        let taken = keys.filter { !claimed.contains($0) }
        guard !taken.isEmpty else { return resends }
        var stored: [Key: Int64] = [:]
        for try await (app, sender, clientMsgId, id) in try await connection.query("""
            SELECT s.app, s.sender, s.client_msg_id, s.id FROM rtm_user_sent s
            JOIN unnest(\(taken.map(\.app))::text[], \(taken.map(\.sender))::text[], \(taken.map(\.id))::int8[]) AS k(app, sender, c)
              ON s.app = k.app AND s.sender = k.sender AND s.client_msg_id = k.c
            """, logger: logger).decode((String, String, Int64, Int64?).self) {
            stored[Key(app: app, sender: sender, id: clientMsgId)] = id ?? 0
        }
        for key in taken { resends[first[key]!] = FirstAttempt(id: stored[key] ?? 0) }
        return resends
    }

    /// Writes the ids the claimed messages got (in the transaction that stored them).
    private static func recordClientIDs(_ records: [(StoredUserMessage, UInt64, Int64)],
                                        on connection: PostgresConnection, logger: Logger) async throws {
        guard !records.isEmpty else { return }
        let apps = records.map(\.0.appId), senders = records.map(\.0.sender)
        let clientIDs = records.map { Int64(bitPattern: $0.1) }, ids = records.map(\.2)
        try await connection.query("""
            UPDATE rtm_user_sent s SET id = u.i
            FROM unnest(\(apps)::text[], \(senders)::text[], \(clientIDs)::int8[], \(ids)::int8[]) AS u(a, sd, c, i)
            WHERE s.app = u.a AND s.sender = u.sd AND s.client_msg_id = u.c
            """, logger: logger)
    }

    /// Stores `messages` and applies `acks`; returns the messages' ids and their mailbox epoch
    /// (nil: the store's).
    private static func commit(_ messages: [StoredUserMessage], acks: [(UserMessageReceiver, Int64)], cap: Int,
                               on connection: PostgresConnection, logger: Logger) async throws -> (ids: [Int64], epoch: String?) {
        if !acks.isEmpty {
            let apps = acks.map(\.0.appId), users = acks.map(\.0.userId), upTo = acks.map(\.1)
            try await connection.query("""
                DELETE FROM rtm_user_message m USING unnest(\(apps)::text[], \(users)::text[], \(upTo)::int8[]) AS a(app, receiver, up)
                WHERE m.app = a.app AND m.receiver = a.receiver AND m.id <= a.up
                """, logger: logger)
        }
        guard !messages.isEmpty else { return ([], nil) }
        var counts: [UserMessageReceiver: Int64] = [:]
        for message in messages { counts[UserMessageReceiver(appId: message.appId, userId: message.receiver), default: 0] += 1 }
        // A fixed lock order for every node: two nodes' commits never deadlock.
        let keys = counts.keys.sorted { ($0.appId, $0.userId) < ($1.appId, $1.userId) }
        let apps = keys.map(\.appId), users = keys.map(\.userId), adds = keys.map { counts[$0]! }
        var next: [UserMessageReceiver: Int64] = [:]
        var epoch: String?
        // On the n-th timeline after the one the store began on (a standby promoted n times),
        // ids are above n * 2^32 and the messages carry a new mailbox epoch: a promoted
        // asynchronous standby may lack ids the old primary gave out (migration 6).
        for try await (app, user, seq, label) in try await connection.query("""
            WITH tl AS MATERIALIZED (SELECT rtm_timeline() AS t),
            base AS (SELECT (SELECT value FROM rtm_meta WHERE key = 'user_timeline') AS t, (SELECT value FROM rtm_meta WHERE key = 'user_epoch') AS e),
            floor AS (SELECT greatest(0, ('x' || tl.t)::bit(32)::int8 - ('x' || base.t)::bit(32)::int8) * 4294967296 AS f,
                             CASE WHEN tl.t = base.t THEN NULL ELSE base.e || '.' || tl.t END AS label FROM tl, base)
            INSERT INTO rtm_user_seq AS s (app, receiver, seq)
            SELECT k.a, k.r, floor.f + k.n FROM unnest(\(apps)::text[], \(users)::text[], \(adds)::int8[]) AS k(a, r, n), floor
            ON CONFLICT (app, receiver) DO UPDATE SET seq = greatest(s.seq, (SELECT f FROM floor)) + EXCLUDED.seq - (SELECT f FROM floor)
            RETURNING app, receiver, seq, (SELECT label FROM floor)
            """, logger: logger).decode((String, String, Int64, String?).self) {
            let key = UserMessageReceiver(appId: app, userId: user)
            next[key] = seq - counts[key]! + 1
            epoch = label
        }
        var ids: [Int64] = [], rowApps: [String] = [], rowUsers: [String] = [], senders: [String] = []
        var texts: [String] = [], hasText: [Bool] = [], datas: [ByteBuffer] = [], hasData: [Bool] = []
        var types: [String] = [], hasType: [Bool] = [], stamps: [Int64] = []
        for message in messages {
            let key = UserMessageReceiver(appId: message.appId, userId: message.receiver)
            let id = next[key]!
            next[key] = id + 1
            ids.append(id); rowApps.append(message.appId); rowUsers.append(message.receiver); senders.append(message.sender)
            texts.append(message.text ?? ""); hasText.append(message.text != nil)
            datas.append(ByteBuffer(bytes: message.data ?? Data())); hasData.append(message.data != nil)
            types.append(message.customType ?? ""); hasType.append(message.customType != nil)
            stamps.append(message.ts)
        }
        try await connection.query("""
            INSERT INTO rtm_user_message (app, receiver, id, sender, text, data, custom_type, ts, epoch)
            SELECT a, r, i, s, CASE WHEN ht THEN t END, CASE WHEN hd THEN d END, CASE WHEN hc THEN c END, ts, \(epoch)
            FROM unnest(\(rowApps)::text[], \(rowUsers)::text[], \(ids)::int8[], \(senders)::text[], \(texts)::text[], \(hasText)::bool[],
                        \(datas)::bytea[], \(hasData)::bool[], \(types)::text[], \(hasType)::bool[], \(stamps)::int8[])
                 AS u(a, r, i, s, t, ht, d, hd, c, hc, ts)
            """, logger: logger)
        // The cap (M-1): the oldest beyond `cap` per receiver are dropped and counted.
        try await connection.query("""
            WITH over AS (
                SELECT m.app, m.receiver, m.id FROM unnest(\(apps)::text[], \(users)::text[]) AS k(app, receiver)
                CROSS JOIN LATERAL (SELECT app, receiver, id FROM rtm_user_message
                                    WHERE app = k.app AND receiver = k.receiver ORDER BY id DESC OFFSET \(Int64(cap))) m),
            d AS (DELETE FROM rtm_user_message x USING over
                  WHERE x.app = over.app AND x.receiver = over.receiver AND x.id = over.id RETURNING x.app, x.receiver)
            INSERT INTO rtm_user_dropped AS u (app, receiver, count)
            SELECT app, receiver, count(*) FROM d GROUP BY app, receiver
            ON CONFLICT (app, receiver) DO UPDATE SET count = u.count + EXCLUDED.count
            """, logger: logger)
        return (ids, epoch)
    }

    public func pending(appId: String, receiver: String, notBefore: Int64) throws -> [StoredUserMessage] {
        let client = self.client, logger = self.logger
        return try blocking {
            try await client.transaction(ReadPending(appId: appId, receiver: receiver, notBefore: notBefore), logger: logger)
        }
    }

    /// The read of a receiver's waiting messages (`pending`), dropping those past their age.
    private struct ReadPending: PostgresTransaction {
        let appId: String
        let receiver: String
        let notBefore: Int64

        func run(on connection: PostgresConnection, logger: Logger) async throws -> [StoredUserMessage] {
            try await connection.query("""
                WITH d AS (DELETE FROM rtm_user_message WHERE app = \(appId) AND receiver = \(receiver) AND ts < \(notBefore) RETURNING 1)
                INSERT INTO rtm_user_dropped AS u (app, receiver, count)
                SELECT \(appId), \(receiver), count(*) FROM d HAVING count(*) > 0
                ON CONFLICT (app, receiver) DO UPDATE SET count = u.count + EXCLUDED.count
                """, logger: logger)
            var messages: [StoredUserMessage] = []
            let rows = try await connection.query("""
                SELECT id, sender, text, data, custom_type, ts, epoch FROM rtm_user_message
                WHERE app = \(appId) AND receiver = \(receiver) ORDER BY id
                """, logger: logger)
            typealias Row = (Int64, String, String?, ByteBuffer?, String?, Int64, String?)
            for try await (id, sender, text, data, customType, ts, epoch) in rows.decode(Row.self) {
                messages.append(StoredUserMessage(id: id, appId: appId, receiver: receiver, sender: sender, text: text,
                                                  data: data.map { Data($0.readableBytesView) }, customType: customType, ts: ts,
                                                  epoch: epoch))
            }
            return messages
        }
    }

    public func takeDropped(appId: String, receiver: String) throws -> Int {
        let client = self.client, logger = self.logger
        return try blocking {
            var count: Int64 = 0
            for try await taken in try await client.query(
                "DELETE FROM rtm_user_dropped WHERE app = \(appId) AND receiver = \(receiver) RETURNING count", logger: logger)
                .decode(Int64.self) { count += taken }
            return Int(count)
        }
    }

    // MARK: following the other nodes

    public func newest(_ receivers: [UserMessageReceiver]) throws -> [UserMessageReceiver: Int64] {
        guard !receivers.isEmpty else { return [:] }
        let apps = receivers.map(\.appId), users = receivers.map(\.userId)
        let client = self.client, logger = self.logger
        return try blocking {
            var newest: [UserMessageReceiver: Int64] = [:]
            for try await (app, user, seq) in try await client.query("""
                SELECT s.app, s.receiver, s.seq FROM rtm_user_seq s
                JOIN unnest(\(apps)::text[], \(users)::text[]) AS k(app, receiver) ON s.app = k.app AND s.receiver = k.receiver
                """, logger: logger).decode((String, String, Int64).self) {
                newest[UserMessageReceiver(appId: app, userId: user)] = seq
            }
            return newest
        }
    }

    public func follow(_ changed: @escaping @Sendable ([UserMessageReceiver]?) -> Void) {
        let polling = Task { [pollInterval] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(pollInterval.nanoseconds))
                if !Task.isCancelled { changed(nil) }
            }
        }
        let listening = Task { await self.listen(changed) }
        tasks.withLockedValue { $0.insert(contentsOf: [polling, listening], at: 0) }   // stopped before the client
    }

    /// Keeps one connection listening; after every (re)connection, any receiver may have missed
    /// a notification.
    private func listen(_ changed: @escaping @Sendable ([UserMessageReceiver]?) -> Void) async {
        let node = self.node
        while !Task.isCancelled {
            do {
                try await listener.listen(on: Self.notificationChannel, logger: logger) { notifications in
                    changed(nil)
                    for try await notification in notifications {
                        guard let notice = try? JSONDecoder().decode(Notice.self, from: Data(notification.payload.utf8)) else {
                            changed(nil)
                            continue
                        }
                        guard notice.n != node else { continue }   // delivered by this node as it committed
                        changed(notice.r.isEmpty ? nil : notice.r.compactMap { $0.count == 2 ? UserMessageReceiver(appId: $0[0], userId: $0[1]) : nil })
                    }
                }
            } catch {
                if !Task.isCancelled { logger.debug("user-message listening connection lost; polling", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(nanoseconds: UInt64(retryInterval.nanoseconds))
        }
    }

    public func stop() async {
        let tasks = self.tasks.withLockedValue { tasks in defer { tasks = [] }; return tasks }
        for task in tasks {
            task.cancel()
            await task.value
        }
    }

    // MARK: internals

    /// Wakes the other nodes (after the commit, outside it): the receivers, or "any" when they
    /// do not fit a notification's 8000 bytes.
    private func notify(_ receivers: Set<UserMessageReceiver>) {
        var notice = Notice(n: node, r: receivers.map { [$0.appId, $0.userId] })
        var payload = (try? JSONEncoder().encode(notice)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        if payload.utf8.count > 7_900 {
            notice.r = []
            payload = (try? JSONEncoder().encode(notice)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        }
        let client = self.client, logger = self.logger
        Task {
            do {
                // Committed without waiting for a WAL flush: a wake-up stores nothing (SPEC M-1
                // holds: the messages were flushed by their own commit).
                try await client.query("SELECT set_config('synchronous_commit', 'off', true), pg_notify(\(Self.notificationChannel), \(payload))",
                                       logger: logger)
            } catch {
                logger.debug("NOTIFY failed (other nodes poll)", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Runs `body` and blocks the calling thread (the store's `thread`, never an event loop) until it ends or `callTimeout` passes.
    private func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        try blockingCall(timeout: callTimeout, body)
    }
}
