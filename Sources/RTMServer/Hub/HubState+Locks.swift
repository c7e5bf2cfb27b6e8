import NIOCore
import RTMProtocol

/// Locks (AGORA_REFERENCE §2.12) with fencing tokens. Part of the hub state because a lock's
/// life follows its owner's session: released at once on logout, and after the lock's TTL when
/// the owner's connection is lost and does not come back.
extension HubState {
    struct LockState {
        var ttl: Int
        var owner: String?
        var fencingToken: UInt64 = 0
        /// acquireLock(retry: true) callers, first come first served.
        var waiters: [LockWaiter] = []

        func detail(_ name: String) -> LockDetail {
            LockDetail(lockName: name, owner: owner ?? "", ttl: ttl, fencingToken: owner == nil ? 0 : fencingToken)
        }
    }

    struct LockWaiter {
        let connection: ConnectionRef
        let userId: String
        let requestID: UInt64?
    }

    /// A frame for one connection (a waiter's late reply).
    struct Direct: Sendable {
        let connection: ConnectionRef
        let frame: Frame
    }

    /// What a lock operation decided.
    struct LockOutcome {
        /// The reply to the caller: nil while it waits for the lock (acquire with retry).
        var reply: Result<Frame, LockFailure>?
        var broadcasts: [Broadcast] = []
        var directs: [Direct] = []
    }

    typealias LockFailure = RequestRefusal

    /// Releases of locks whose owner went offline, due at `deadline`.
    struct LockTimer: Sendable, Equatable {
        let channel: ChannelKey
        let lockName: String
        let owner: String
        let deadline: NIODeadline
    }

    enum LockOperation {
        case set(ttl: Int)
        case acquire(retry: Bool)
        case release
        case revoke(owner: String)
        case remove
    }

    /// Runs one lock operation for the user behind `connection`.
    mutating func lock(_ operation: LockOperation, channel: ChannelKey, name: String, connection: ConnectionRef,
                       requestID: UInt64?, wallMillis: Int64, maxLocks: Int) -> LockOutcome {
        guard let user = sessionByConnection[connection.id]?.userId else {
            return LockOutcome(reply: .failure(LockFailure(code: .notLogin, reason: "not logged in")))
        }
        var table = locks[channel] ?? [:]
        defer { locks[channel] = table.isEmpty ? nil : table }
        func fail(_ code: RTMErrorCode, _ reason: String) -> LockOutcome {
            LockOutcome(reply: .failure(LockFailure(code: code, reason: reason)))
        }
        func ok(_ lock: LockState? = nil) -> Frame {
            var frame = Frame(type: .ok, id: requestID, channel: channel.name)
            frame.lockName = name
            if let lock, lock.owner != nil { frame.fencingToken = lock.fencingToken }
            return frame
        }
        switch operation {
        case .set(let ttl):
            if let existing = table[name] {
                if existing.ttl == ttl { return LockOutcome(reply: .success(ok())) }
                return fail(.lockAlreadyExist, "lock '\(name)' exists with ttl \(existing.ttl) s")
            }
            guard table.count < maxLocks else { return fail(.lockOperationFailed, "channel '\(channel.name)' has \(maxLocks) locks, the limit") }
            table[name] = LockState(ttl: ttl)
            return LockOutcome(reply: .success(ok()), broadcasts: [lockEvent(.lockSet, channel, [table[name]!.detail(name)], wallMillis)])
        case .acquire(let retry):
            guard var lock = table[name] else { return fail(.lockNotExist, "no lock '\(name)' in channel '\(channel.name)'") }
            switch lock.owner {
            case user?:
                return LockOutcome(reply: .success(ok(lock)))   // already held: same token (a resend)
            case nil:
                grant(&lock, to: user, wallMillis: wallMillis)
                table[name] = lock
                return LockOutcome(reply: .success(ok(lock)), broadcasts: [lockEvent(.lockAcquired, channel, [lock.detail(name)], wallMillis)])
            case let holder?:
                guard retry else { return fail(.lockAcquireFailed, "lock '\(name)' is held by '\(holder)'") }
                // A second wait from the same connection replaces the first, which is told.
                let superseded = lock.waiters.filter { $0.connection == connection }.map {
                    Direct(connection: $0.connection, frame: .error(id: $0.requestID, .duplicateOperation, "superseded by a newer acquireLock of '\(name)'"))
                }
                lock.waiters.removeAll { $0.connection == connection }
                lock.waiters.append(LockWaiter(connection: connection, userId: user, requestID: requestID))
                table[name] = lock
                return LockOutcome(reply: nil, directs: superseded)
            }
        case .release:
            guard let lock = table[name] else { return fail(.lockNotExist, "no lock '\(name)' in channel '\(channel.name)'") }
            guard lock.owner == user else { return fail(.lockNotAcquired, "lock '\(name)' is not held by '\(user)'") }
            var outcome = handOver(&table, name: name, channel: channel, wallMillis: wallMillis)
            outcome.reply = .success(ok())
            return outcome
        case .revoke(let owner):
            guard let lock = table[name] else { return fail(.lockNotExist, "no lock '\(name)' in channel '\(channel.name)'") }
            guard lock.owner == owner else { return fail(.lockNotAcquired, "lock '\(name)' is not held by '\(owner)'") }
            var outcome = handOver(&table, name: name, channel: channel, wallMillis: wallMillis)
            outcome.reply = .success(ok())
            return outcome
        case .remove:
            guard let lock = table.removeValue(forKey: name) else { return fail(.lockNotExist, "no lock '\(name)' in channel '\(channel.name)'") }
            let directs = lock.waiters.map { waiter in
                Direct(connection: waiter.connection, frame: .error(id: waiter.requestID, .lockNotExist, "lock '\(name)' was removed"))
            }
            return LockOutcome(reply: .success(ok()), broadcasts: [lockEvent(.lockRemoved, channel, [lock.detail(name)], wallMillis)], directs: directs)
        }
    }

    /// The locks of a channel, sorted by name.
    func locks(of channel: ChannelKey) -> [LockDetail] {
        (locks[channel] ?? [:]).sorted { $0.key < $1.key }.map { $0.value.detail($0.key) }
    }

    /// Whether `user` holds lock `name` of `channel` (metadata writes guarded by a lock).
    func holds(_ user: String, lock name: String, in channel: ChannelKey) -> Bool {
        locks[channel]?[name]?.owner == user
    }

    /// The owner's connection was lost: a release timer per lock it holds (TTL from now, the
    /// moment the server decided the owner is offline). Its waits end with the connection.
    mutating func lockOwnerLost(_ connection: ConnectionRef, user: UserKey, now: NIODeadline) -> [LockTimer] {
        var timers: [LockTimer] = []
        for (channel, var table) in locks where channel.appId == user.appId {
            for (name, var lock) in table {
                lock.waiters.removeAll { $0.connection == connection }
                if lock.owner == user.userId {
                    timers.append(LockTimer(channel: channel, lockName: name, owner: user.userId, deadline: now + .seconds(Int64(lock.ttl))))
                }
                table[name] = lock
            }
            locks[channel] = table
        }
        return timers
    }

    /// A release timer fired: released only if the owner is still the same and still offline.
    mutating func lockTimerFired(_ timer: LockTimer, wallMillis: Int64) -> LockOutcome {
        guard var table = locks[timer.channel], table[timer.lockName]?.owner == timer.owner,
              sessions[UserKey(appId: timer.channel.appId, userId: timer.owner)]?.connection == nil else { return LockOutcome() }
        let outcome = handOver(&table, name: timer.lockName, channel: timer.channel, wallMillis: wallMillis)
        locks[timer.channel] = table
        return outcome
    }

    /// Logout (an intentional leave): every lock the user holds is released at once, its waits end.
    mutating func releaseLocks(of user: UserKey, wallMillis: Int64) -> LockOutcome {
        var outcome = LockOutcome()
        for (channel, var table) in locks where channel.appId == user.appId {
            for name in table.keys.sorted() {
                table[name]?.waiters.removeAll { $0.userId == user.userId }
                if table[name]?.owner == user.userId {
                    let step = handOver(&table, name: name, channel: channel, wallMillis: wallMillis)
                    outcome.broadcasts += step.broadcasts
                    outcome.directs += step.directs
                }
            }
            locks[channel] = table
        }
        return outcome
    }

    /// Frees a held lock: the first waiter still online gets it (acquired event and its reply),
    /// else it is released (released event).
    private mutating func handOver(_ table: inout [String: LockState], name: String, channel: ChannelKey, wallMillis: Int64) -> LockOutcome {
        guard var lock = table[name] else { return LockOutcome() }
        lock.owner = nil
        var outcome = LockOutcome(broadcasts: [lockEvent(.lockReleased, channel, [lock.detail(name)], wallMillis)])
        while !lock.waiters.isEmpty {
            let waiter = lock.waiters.removeFirst()
            guard sessionByConnection[waiter.connection.id]?.userId == waiter.userId else { continue }
            grant(&lock, to: waiter.userId, wallMillis: wallMillis)
            var reply = Frame(type: .ok, id: waiter.requestID, channel: channel.name)
            reply.lockName = name
            reply.fencingToken = lock.fencingToken
            outcome.directs.append(Direct(connection: waiter.connection, frame: reply))
            outcome.broadcasts.append(lockEvent(.lockAcquired, channel, [lock.detail(name)], wallMillis))
            break
        }
        table[name] = lock
        return outcome
    }

    private mutating func grant(_ lock: inout LockState, to user: String, wallMillis: Int64) {
        lock.owner = user
        // Fencing tokens increase across the server and across restarts (as long as the wall
        // clock does not step back): at least the current time in microseconds.
        lastFencingToken = max(lastFencingToken + 1, UInt64(max(0, wallMillis)) * 1000)
        lock.fencingToken = lastFencingToken
    }

    func lockEvent(_ kind: LockEventKind, _ channel: ChannelKey, _ details: [LockDetail], _ wallMillis: Int64) -> Broadcast {
        var frame = Frame(type: .lock, channel: channel.name, event: kind.rawValue, ts: wallMillis)
        frame.locks = details
        return Broadcast(channel: channel, frame: frame, loops: channels[channel]?.loops ?? 0, except: nil, requires: .lock)
    }
}
