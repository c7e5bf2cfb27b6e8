import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import RTMProtocol
import RTMServer

/// The cluster's metadata, history and locks (`rtm serve --postgres URL`): the
/// `SharedServices` of every node, in tables they all share (schema migration 4).
///
/// - **Metadata** (§2.11): a write's read, revision check and write run in one transaction
///   holding an advisory lock on the set, so two writers on two nodes with the same expected
///   revision cannot both win; a lock-guarded write checks the lock's owner in that transaction.
/// - **History** (§2.8): one table; a message's timestamp is made unique within its channel in
///   the appending transaction (the paging cursor), so any node serves any channel's history.
/// - **Locks** (§2.12): rows locked `FOR UPDATE` by each operation (one owner at a time across
///   nodes) and one fencing-token sequence for the cluster (`rtm_lock_token`).
///
/// **Across nodes**: after a commit (never inside it) the node sends `NOTIFY rtm_services`
/// naming what changed; every node `LISTEN`s on a dedicated connection and tells its own
/// subscribers (metadata: re-read, if newer than what they were told; locks: the change as
/// announced). While a node's listening connection is down it hears nothing: its subscribers
/// miss those events (a later change, a getMetadata/getLocks or a resubscription shows the
/// current state), and its lock waiters are tried again at every sweep.
///
/// Metadata and history calls are synchronous (RTMServer's storage queue blocks on them, at
/// most `callTimeout`); lock calls are async.
public final class PostgresServices: SharedServiceStore, SharedLockStore {
    /// The `LISTEN`/`NOTIFY` channel of metadata and lock changes.
    public static let notificationChannel = "rtm_services"

    /// This node's name (stored with the locks its users own; its own notifications are ignored).
    public let node: String
    let client: PostgresClient
    let logger: Logger
    let callTimeout: TimeAmount
    /// Where the database is.
    public let location: PostgresLocation
    private let listener: PostgresListener
    private let retryInterval: TimeAmount
    private let tasks = NIOLockedValueBox<[Task<Void, Never>]>([])
    private let followers = NIOLockedValueBox<Followers>(Followers())
    /// Notifications to send, in order, one at a time.
    private let outbox: AsyncStream<String>.Continuation
    private let outgoing: AsyncStream<String>

    private struct Followers {
        var storage: (@Sendable (StorageChangeNotice) -> Void)?
        var locks: (@Sendable ([SharedLockChange]) -> Void)?
    }

    /// What a notification carries: a metadata change or lock changes.
    struct Notice: Codable {
        /// The node that made the change.
        var n: String
        var m: MetadataNotice?
        var l: [LockNotice]?
    }

    struct MetadataNotice: Codable {
        var a: String, t: String, k: String, r: Int64, e: String, all: Bool
    }

    struct LockNotice: Codable {
        var a: String, c: String, e: String, name: String, o: String, ttl: Int, tok: UInt64
    }

    /// The services of node `node`; nothing connects until `start()` (the server calls it).
    /// - Parameters:
    ///   - node: this node's name (`rtm serve --node-id`), the one its backplane uses.
    ///   - poolSize: the pool's connections (default 4), plus one listening connection (or a
    ///     channel on `listener`, the node's shared one).
    ///   - callTimeout: the longest a metadata, history or lock call waits (default 5 s: well
    ///     within the SDK's 10 s request timeout, so that a client gets the server's reason,
    ///     not its own timeout).
    public init(location: PostgresLocation, node: String, poolSize: Int = 4, retryInterval: TimeAmount = .seconds(1),
                callTimeout: TimeAmount = .seconds(5), listener: PostgresListener? = nil, logger: Logger) {
        self.listener = listener ?? PostgresListener(location: location)
        self.client = PostgresClient(configuration: location.clientConfiguration(connections: poolSize), backgroundLogger: logger)
        self.location = location
        self.node = node
        self.retryInterval = retryInterval
        self.callTimeout = callTimeout
        self.logger = logger
        let (stream, outbox) = AsyncStream<String>.makeStream()
        self.outbox = outbox
        self.outgoing = stream
    }

    /// Starts the pool, migrates the schema, marks the locks a previous run of this node held
    /// as due (their owners' TTL counts from now) and starts listening to the other nodes.
    public func start() async throws {
        let client = self.client, logger = self.logger, outgoing = self.outgoing
        let running = Task { await client.run() }
        tasks.withLockedValue { $0.append(running) }
        try await PostgresSchema.migrate(client, logger: logger)
        // A previous run of this node (killed, restarted before the others declared it dead)
        // left its users' locks on it; no session is here yet: they are due after their TTL.
        try await nodeDied(node)
        let sending = Task {
            for await payload in outgoing {
                do {
                    // Committed without waiting for a WAL flush: the event is a wake-up, the
                    // change it announces was flushed by its own commit.
                    try await client.query("SELECT set_config('synchronous_commit', 'off', true), pg_notify(\(Self.notificationChannel), \(payload))",
                                           logger: logger)
                } catch {
                    logger.debug("NOTIFY failed (other nodes miss this event)", metadata: ["error": "\(error)"])
                }
            }
        }
        let (listeningStarted, started) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let listening = Task { [weak self] in await self?.listen(started: started) ?? () }
        tasks.withLockedValue { $0.insert(contentsOf: [listening, sending], at: 0) }   // stopped before the client
        // The other nodes' metadata and lock changes are heard from when this returns: a change
        // announced before this node's LISTEN ran would never reach it (a lock event missed by
        // the members here). Bounded: a database that does not answer leaves the retries to
        // `listen`.
        do {
            try await BoundedCall.run("LISTEN for the other nodes' changes", timeout: callTimeout) {
                for await _ in listeningStarted { return }
            }
        } catch {
            logger.warning("not yet listening to the other nodes' metadata and lock changes: retrying in the background",
                           metadata: ["error": "\(error)"])
        }
    }

    /// Stops listening and closes the connections.
    public func stop() async {
        outbox.finish()
        let tasks = self.tasks.withLockedValue { tasks in defer { tasks = [] }; return tasks }
        for task in tasks {
            task.cancel()
            await task.value
        }
    }

    // MARK: across nodes

    public func followStorage(_ changed: @escaping @Sendable (StorageChangeNotice) -> Void) {
        followers.withLockedValue { $0.storage = changed }
    }

    public func followLocks(_ changed: @escaping @Sendable ([SharedLockChange]) -> Void) {
        followers.withLockedValue { $0.locks = changed }
    }

    public func announce(_ notice: StorageChangeNotice) {
        let key = notice.key
        send(Notice(n: node, m: MetadataNotice(a: key.appId, t: key.type.rawValue, k: key.target, r: notice.majorRevision,
                                               e: notice.kind.rawValue, all: notice.notifyAll)))
    }

    public func announce(_ changes: [SharedLockChange]) {
        // 20 changes (each names at most ~300 bytes) stay under a notification's 8000 bytes.
        for start in stride(from: 0, to: changes.count, by: 20) {
            send(Notice(n: node, l: changes[start..<min(start + 20, changes.count)].map {
                LockNotice(a: $0.appId, c: $0.channel, e: $0.kind.rawValue, name: $0.detail.lockName, o: $0.detail.owner,
                           ttl: $0.detail.ttl, tok: $0.detail.fencingToken)
            }))
        }
    }

    private func send(_ notice: Notice) {
        guard let payload = try? JSONEncoder().encode(notice) else { return }
        outbox.yield(String(decoding: payload, as: UTF8.self))
    }

    /// Keeps one connection listening, and hands other nodes' notices to the followers;
    /// `started` is told each time a LISTEN has been confirmed.
    private func listen(started: AsyncStream<Void>.Continuation) async {
        while !Task.isCancelled {
            do {
                try await listener.listen(on: Self.notificationChannel, logger: logger) { notifications in
                    started.yield()
                    for try await notification in notifications { dispatch(notification.payload) }
                }
            } catch {
                if !Task.isCancelled { logger.debug("services listening connection lost", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(nanoseconds: UInt64(retryInterval.nanoseconds))
        }
    }

    private func dispatch(_ payload: String) {
        guard let notice = try? JSONDecoder().decode(Notice.self, from: Data(payload.utf8)), notice.n != node else { return }
        let followers = self.followers.withLockedValue { $0 }
        if let m = notice.m, let type = StorageType(rawValue: m.t), let kind = StorageEventKind(rawValue: m.e) {
            followers.storage?(StorageChangeNotice(key: StorageKey(appId: m.a, type: type, target: m.k), kind: kind,
                                                   majorRevision: m.r, notifyAll: m.all))
        }
        if let locks = notice.l {
            let changes = locks.compactMap { lock in
                LockEventKind(rawValue: lock.e).map {
                    SharedLockChange(appId: lock.a, channel: lock.c, kind: $0,
                                     detail: LockDetail(lockName: lock.name, owner: lock.o, ttl: lock.ttl, fencingToken: lock.tok))
                }
            }
            if !changes.isEmpty { followers.locks?(changes) }
        }
    }
}
