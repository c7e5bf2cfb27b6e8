import NIOCore
import RTMProtocol

/// The locks of a single node as a value (AGORA_REFERENCE §2.12), time passed in: the state
/// behind `MemoryLockStore`, the in-memory implementation of the `SharedLockStore` seam that
/// a cluster fills with PostgreSQL. Same rules as the shared store: a lock is released `ttl`
/// after its owner is declared offline unless it comes back (`ownerOffline`, `ownerOnline`,
/// `sweep`), at once on logout (`releaseAll`); fencing tokens only increase.
struct LockTable {
    private struct Lock {
        var ttl: Int
        var owner: String?
        var token: UInt64 = 0
        /// When it is released unless its owner comes back (nil: not due).
        var due: NIODeadline?

        func detail(_ name: String) -> LockDetail {
            LockDetail(lockName: name, owner: owner ?? "", ttl: ttl, fencingToken: owner == nil ? 0 : token)
        }
    }

    private struct Channel: Hashable {
        let appId: String
        let name: String
    }

    private var channels: [Channel: [String: Lock]] = [:]
    private var lastToken: UInt64 = 0

    /// Runs one lock operation for `user`.
    mutating func perform(_ operation: SharedLockOperation, appId: String, channel name: String, name lockName: String,
                          user: String, wallMillis: Int64) -> SharedLockResult {
        let channel = Channel(appId: appId, name: name)
        var table = channels[channel] ?? [:]
        defer { channels[channel] = table.isEmpty ? nil : table }
        func change(_ kind: LockEventKind, _ detail: LockDetail) -> SharedLockResult {
            .done(detail, change: SharedLockChange(appId: appId, channel: name, kind: kind, detail: detail))
        }
        func refused(_ code: RTMErrorCode, _ reason: String) -> SharedLockResult {
            .refused(RequestRefusal(code: code, reason: reason))
        }
        let missing = refused(.lockNotExist, "no lock '\(lockName)' in channel '\(name)'")
        switch operation {
        case .set(let ttl, let maxLocks):
            if let existing = table[lockName] {
                return existing.ttl == ttl ? .done(existing.detail(lockName), change: nil)
                    : refused(.lockAlreadyExist, "lock '\(lockName)' exists with ttl \(existing.ttl) s")
            }
            guard table.count < maxLocks else { return refused(.lockOperationFailed, "channel '\(name)' has \(maxLocks) locks, the limit") }
            table[lockName] = Lock(ttl: ttl)
            return change(.lockSet, LockDetail(lockName: lockName, ttl: ttl))
        case .acquire:
            guard var lock = table[lockName] else { return missing }
            switch lock.owner {
            case user?:
                lock.due = nil   // already held (a resend): the same token
                table[lockName] = lock
                return .done(lock.detail(lockName), change: nil)
            case let holder?:
                return refused(.lockAcquireFailed, "lock '\(lockName)' is held by '\(holder)'")
            case nil:
                // Fencing tokens increase across the server and across restarts (as long as the
                // wall clock does not step back): at least the current time in microseconds.
                lastToken = max(lastToken + 1, UInt64(max(0, wallMillis)) * 1000)
                lock.owner = user
                lock.token = lastToken
                lock.due = nil
                table[lockName] = lock
                return change(.lockAcquired, lock.detail(lockName))
            }
        case .release, .revoke:
            guard var lock = table[lockName] else { return missing }
            let owner: String
            if case .revoke(let named) = operation { owner = named } else { owner = user }
            guard lock.owner == owner else { return refused(.lockNotAcquired, "lock '\(lockName)' is not held by '\(owner)'") }
            lock.owner = nil
            lock.due = nil
            table[lockName] = lock
            return change(.lockReleased, lock.detail(lockName))
        case .remove:
            guard let lock = table.removeValue(forKey: lockName) else { return missing }
            return change(.lockRemoved, lock.detail(lockName))
        }
    }

    /// The locks of a channel, sorted by name.
    func locks(appId: String, channel: String) -> [LockDetail] {
        (channels[Channel(appId: appId, name: channel)] ?? [:]).sorted { $0.key < $1.key }.map { $0.value.detail($0.key) }
    }

    /// Whether `user` holds lock `name` of `channel` (a metadata write guarded by a lock, §2.11).
    func holds(_ user: String, lock name: String, appId: String, channel: String) -> Bool {
        channels[Channel(appId: appId, name: channel)]?[name]?.owner == user
    }

    /// `user` is offline: each lock it holds is due `ttl` from `now` (one already due keeps its time).
    mutating func ownerOffline(appId: String, user: String, now: NIODeadline) {
        update(appId: appId, owner: user) { lock in
            if lock.due == nil { lock.due = now + .seconds(Int64(lock.ttl)) }
        }
    }

    /// `user` is back: its locks are no longer due.
    mutating func ownerOnline(appId: String, user: String) {
        update(appId: appId, owner: user) { $0.due = nil }
    }

    /// `user` logged out: its locks are released now.
    mutating func releaseAll(appId: String, user: String) -> [SharedLockChange] {
        release { channel, lock in channel.appId == appId && lock.owner == user }
    }

    /// Releases every lock due at `now`.
    mutating func sweep(now: NIODeadline) -> [SharedLockChange] {
        release { _, lock in lock.due.map { $0 <= now } ?? false }
    }

    /// Changes every lock `owner` holds in `appId`'s channels, in place.
    private mutating func update(appId: String, owner: String, _ change: (inout Lock) -> Void) {
        for (channel, name) in held(where: { channel, lock in channel.appId == appId && lock.owner == owner }) {
            change(&channels[channel]![name]!)
        }
    }

    /// Releases the held locks `matches` picks; their changes in channel, then name, order.
    private mutating func release(where matches: (Channel, Lock) -> Bool) -> [SharedLockChange] {
        var changes: [SharedLockChange] = []
        for (channel, name) in held(where: matches).sorted(by: { ($0.0.appId, $0.0.name, $0.1) < ($1.0.appId, $1.0.name, $1.1) }) {
            channels[channel]![name]!.owner = nil
            channels[channel]![name]!.due = nil
            changes.append(SharedLockChange(appId: channel.appId, channel: channel.name, kind: .lockReleased,
                                            detail: channels[channel]![name]!.detail(name)))
        }
        return changes
    }

    /// The held locks `matches` picks (none copied or sorted on the way: most sweeps find none).
    private func held(where matches: (Channel, Lock) -> Bool) -> [(Channel, String)] {
        var found: [(Channel, String)] = []
        for (channel, table) in channels {
            for (name, lock) in table where lock.owner != nil && matches(channel, lock) { found.append((channel, name)) }
        }
        return found
    }
}
