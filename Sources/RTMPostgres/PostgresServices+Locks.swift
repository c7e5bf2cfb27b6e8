import Logging
import PostgresNIO
import RTMProtocol
import RTMServer

/// Locks (`SharedLockStore`, §2.12): each operation reads its row `FOR UPDATE`, so operations on
/// one lock are serial across nodes; acquisitions draw their fencing token from the cluster's
/// one sequence (`rtm_lock_token`), so a later acquisition of a lock always has a larger token.
extension PostgresServices {
    /// A lock row as read.
    private struct Row {
        var ttl: Int
        var owner: String?
        var token: Int64

        func detail(_ name: String) -> LockDetail {
            LockDetail(lockName: name, owner: owner ?? "", ttl: ttl, fencingToken: owner == nil ? 0 : UInt64(token))
        }
    }

    public func perform(_ operation: SharedLockOperation, appId: String, channel: String, name: String,
                        user: String) async throws -> SharedLockResult {
        let logger = self.logger
        let work = LockTransaction(operation: operation, appId: appId, channel: channel, name: name, user: user, node: self.node)
        return try await bounded("a lock operation") { [client] in try await client.transaction(work, logger: logger) }
    }

    /// One lock operation (`perform`), under the lock row's `FOR UPDATE`.
    private struct LockTransaction: PostgresTransaction {
        let operation: SharedLockOperation
        let appId: String
        let channel: String
        let name: String
        let user: String
        let node: String

        func run(on connection: PostgresConnection, logger: Logger) async throws -> SharedLockResult {
            func change(_ kind: LockEventKind, _ detail: LockDetail) -> SharedLockResult {
                .done(detail, change: SharedLockChange(appId: appId, channel: channel, kind: kind, detail: detail))
            }
            if case .set = operation {
                // Creations of one channel one at a time: the per-channel limit holds across nodes.
                try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(appId + "\n" + channel), 13))", logger: logger)
            }
            var row: Row?
            for try await (ttl, owner, token) in try await connection.query("""
                SELECT ttl, owner, token FROM rtm_lock WHERE app = \(appId) AND channel = \(channel) AND name = \(name) FOR UPDATE
                """, logger: logger).decode((Int, String?, Int64).self) { row = Row(ttl: ttl, owner: owner, token: token) }
            let missing = SharedLockResult.refused(RequestRefusal(code: .lockNotExist, reason: "no lock '\(name)' in channel '\(channel)'"))
            switch operation {
            case .set(let ttl, let maxLocks):
                if let row {
                    return row.ttl == ttl ? .done(row.detail(name), change: nil)
                        : .refused(RequestRefusal(code: .lockAlreadyExist, reason: "lock '\(name)' exists with ttl \(row.ttl) s"))
                }
                var count = 0
                for try await value in try await connection.query("""
                    SELECT count(*) FROM rtm_lock WHERE app = \(appId) AND channel = \(channel)
                    """, logger: logger).decode(Int.self) { count = value }
                guard count < maxLocks else { return .refused(RequestRefusal(code: .lockOperationFailed, reason: "channel '\(channel)' has \(maxLocks) locks, the limit")) }
                try await connection.query("""
                    INSERT INTO rtm_lock (app, channel, name, ttl) VALUES (\(appId), \(channel), \(name), \(ttl))
                    """, logger: logger)
                return change(.lockSet, LockDetail(lockName: name, ttl: ttl))
            case .acquire:
                guard let row else { return missing }
                switch row.owner {
                case user?:
                    // Already held (a resend, or back on another node): the same token, on this node now.
                    try await connection.query("""
                        UPDATE rtm_lock SET owner_node = \(node), due_at = NULL WHERE app = \(appId) AND channel = \(channel) AND name = \(name)
                        """, logger: logger)
                    return .done(row.detail(name), change: nil)
                case let holder?:
                    return .refused(RequestRefusal(code: .lockAcquireFailed, reason: "lock '\(name)' is held by '\(holder)'"))
                case nil:
                    var token: Int64 = 0
                    for try await value in try await connection.query("""
                        UPDATE rtm_lock SET owner = \(user), owner_node = \(node), due_at = NULL, token = nextval('rtm_lock_token')
                        WHERE app = \(appId) AND channel = \(channel) AND name = \(name) RETURNING token
                        """, logger: logger).decode(Int64.self) { token = value }
                    return change(.lockAcquired, LockDetail(lockName: name, owner: user, ttl: row.ttl, fencingToken: UInt64(token)))
                }
            case .release, .revoke:
                guard let row else { return missing }
                let owner: String
                if case .revoke(let named) = operation { owner = named } else { owner = user }
                guard row.owner == owner else { return .refused(RequestRefusal(code: .lockNotAcquired, reason: "lock '\(name)' is not held by '\(owner)'")) }
                try await connection.query("""
                    UPDATE rtm_lock SET owner = NULL, owner_node = NULL, due_at = NULL WHERE app = \(appId) AND channel = \(channel) AND name = \(name)
                    """, logger: logger)
                return change(.lockReleased, LockDetail(lockName: name, ttl: row.ttl))
            case .remove:
                guard let row else { return missing }
                try await connection.query("DELETE FROM rtm_lock WHERE app = \(appId) AND channel = \(channel) AND name = \(name)", logger: logger)
                return change(.lockRemoved, row.detail(name))
            }
        }
    }

    /// The channel's locks in code point order (`COLLATE "C"`), as one node sorts them, whatever
    /// the database's own collation.
    public func locks(appId: String, channel: String) async throws -> [LockDetail] {
        try await bounded("a lock list") { [self] in
            var details: [LockDetail] = []
            for try await (name, ttl, owner, token) in try await client.query("""
                SELECT name, ttl, owner, token FROM rtm_lock WHERE app = \(appId) AND channel = \(channel) ORDER BY name COLLATE "C"
                """, logger: logger).decode((String, Int, String?, Int64).self) {
                details.append(Row(ttl: ttl, owner: owner, token: token).detail(name))
            }
            return details
        }
    }

    public func ownerOffline(appId: String, user: String) async throws {
        // Only the locks held through this node: the owner may be back on another one already.
        try await bounded("the locks of a user gone offline") { [self] in
            _ = try await client.query("""
                UPDATE rtm_lock SET due_at = now() + ttl * interval '1 second'
                WHERE app = \(appId) AND owner = \(user) AND owner_node = \(node) AND due_at IS NULL
                """, logger: logger)
        }
    }

    public func ownerOnline(appId: String, user: String) async throws {
        try await bounded("the locks of a user back online") { [self] in
            _ = try await client.query("""
                UPDATE rtm_lock SET due_at = NULL, owner_node = \(node) WHERE app = \(appId) AND owner = \(user)
                """, logger: logger)
        }
    }

    public func releaseAll(appId: String, user: String) async throws -> [SharedLockChange] {
        try await bounded("releasing a user's locks") { [self] in
            try await released(client.query("""
                UPDATE rtm_lock SET owner = NULL, owner_node = NULL, due_at = NULL WHERE app = \(appId) AND owner = \(user)
                RETURNING app, channel, name, ttl
                """, logger: logger))
        }
    }

    public func nodeDied(_ node: String) async throws {
        // TTL counted from now, when the survivors declared the node dead (§2.12 since 2.2.2:
        // from when the server decides the owner is offline). A lock already due keeps its time.
        try await bounded("the locks of a dead node") { [self] in
            _ = try await client.query("""
                UPDATE rtm_lock SET due_at = now() + ttl * interval '1 second'
                WHERE owner_node = \(node) AND owner IS NOT NULL AND due_at IS NULL
                """, logger: logger)
        }
    }

    public func sweep() async throws -> [SharedLockChange] {
        try await bounded("the lock sweep") { [self] in
            try await released(client.query("""
                UPDATE rtm_lock SET owner = NULL, owner_node = NULL, due_at = NULL WHERE due_at <= now()
                RETURNING app, channel, name, ttl
                """, logger: logger))
        }
    }

    /// `body` under the services' deadline (`BoundedCall`): PostgresNIO's pool can lease a
    /// connection that just closed, and a query written to it is never answered; a lock request
    /// then fails at `callTimeout` (it may still have committed: a resent acquire by the same
    /// user is answered with the same token) and the periodic sweep is not stopped for good.
    private func bounded<T: Sendable>(_ operation: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await BoundedCall.run(operation, timeout: callTimeout, body)
    }

    /// The lockReleased changes of released rows.
    private func released(_ rows: PostgresRowSequence) async throws -> [SharedLockChange] {
        var changes: [SharedLockChange] = []
        for try await (app, channel, name, ttl) in rows.decode((String, String, String, Int).self) {
            changes.append(SharedLockChange(appId: app, channel: channel, kind: .lockReleased, detail: LockDetail(lockName: name, ttl: ttl)))
        }
        return changes.sorted { ($0.appId, $0.channel, $0.detail.lockName) < ($1.appId, $1.channel, $1.detail.lockName) }
    }
}
