import NIOCore
import RTMProtocol

/// Locks (§2.12), one path on one node and in a cluster: every operation goes to the lock store
/// (`MemoryLockStore` on one node; the database in a cluster, `ServerConfiguration.sharedServices`)
/// through this node's serial queue (`LockService`); the node that made a change tells its own
/// channel members at once and announces it, the other nodes tell theirs when they hear of it.
/// Waiters (`retry`) are tried again whenever a release is made or heard of, and at every sweep
/// (which also releases what is due, on any node).
extension Hub {
    /// Runs a lock request; the caller's reply is sent when the store has answered (none while
    /// it waits for the lock).
    func lock(_ request: LockService.Request, channel: ChannelKey, name: String, connection: ConnectionRef, requestID: UInt64?) {
        guard let user = userKey(of: connection) else {
            reply(.error(id: requestID, .notLogin, "not logged in"), to: request.frameType, on: connection.channel)
            return
        }
        let key = LockService.LockKey(appId: channel.appId, channel: channel.name, name: name)
        locks.enqueue { [self] in
            let result: SharedLockResult
            do {
                result = try await locks.store.perform(request.operation, appId: channel.appId, channel: channel.name, name: name, user: user.userId)
            } catch {
                reply(.error(id: requestID, .lockOperationFailed, "the lock store failed: \(error)"), to: request.frameType, on: connection.channel)
                return
            }
            switch result {
            case .done(let detail, let change):
                if let change { await lockChanged([change], local: true) }
                reply(Self.lockReply(requestID, channel: channel.name, lockName: name, detail: request.operation == .acquire ? detail : nil),
                      to: request.frameType, on: connection.channel)
            case .refused(let refusal) where refusal.code == .lockAcquireFailed && request.waits:
                let waiter = LockService.Waiter(connection: connection, userId: user.userId, requestID: requestID)
                if let superseded = locks.wait(waiter, for: key) {
                    reply(.error(id: superseded.requestID, .duplicateOperation, "superseded by a newer acquireLock of '\(name)'"),
                          to: .acquireLock, on: superseded.connection.channel)
                }
            case .refused(let refusal):
                reply(.error(id: requestID, refusal.code, refusal.reason), to: request.frameType, on: connection.channel)
            }
        }
    }

    /// The locks of a channel (getLocks, the withLock snapshot), read in queue order.
    func readLocks(appId: String, channel: String, reply: @escaping @Sendable (Result<[LockDetail], any Error>) -> Void) {
        locks.enqueue { [locks] in
            do { reply(.success(try await locks.store.locks(appId: appId, channel: channel))) } catch { reply(.failure(error)) }
        }
    }

    /// Changes made here (`local`, announced to the other nodes) or heard of: this node's channel
    /// members get the lock events; this node's waiters of a removed lock are told, and those of
    /// a released one try again.
    func lockChanged(_ changes: [SharedLockChange], local: Bool) async {
        guard !changes.isEmpty else { return }
        if local { locks.store.announce(changes) }
        let wallMillis = Self.wallMillis
        modify { state in
            changes.map { .broadcast(state.lockEvent($0.kind, ChannelKey(appId: $0.appId, name: $0.channel), [$0.detail], wallMillis)) }
        }
        for change in changes {
            let key = LockService.LockKey(appId: change.appId, channel: change.channel, name: change.detail.lockName)
            switch change.kind {
            case .lockRemoved:
                for waiter in locks.removeAll(of: key) {
                    reply(.error(id: waiter.requestID, .lockNotExist, "lock '\(key.name)' was removed"), to: .acquireLock, on: waiter.connection.channel)
                }
            case .lockReleased:
                await grantWaiters(of: key)
            default:
                break
            }
        }
    }

    /// Tries to give a lock to its first waiter still logged in on this node: it gets the
    /// acquisition's reply (with its fencing token), and the members the acquired event.
    private func grantWaiters(of key: LockService.LockKey) async {
        while let waiter = locks.firstWaiter(of: key) {
            guard userKey(of: waiter.connection)?.userId == waiter.userId else {
                locks.removeFirst(waiter, of: key)   // its session ended
                continue
            }
            let result = try? await locks.store.perform(.acquire, appId: key.appId, channel: key.channel, name: key.name, user: waiter.userId)
            switch result {
            case .done(let detail, let change)?:
                locks.removeFirst(waiter, of: key)
                if let change { await lockChanged([change], local: true) }
                reply(Self.lockReply(waiter.requestID, channel: key.channel, lockName: key.name, detail: detail), to: .acquireLock, on: waiter.connection.channel)
                return
            case .refused(let refusal)? where refusal.code == .lockNotExist:
                locks.removeFirst(waiter, of: key)
                reply(.error(id: waiter.requestID, .lockNotExist, refusal.reason), to: .acquireLock, on: waiter.connection.channel)
            default:
                return   // held again (or the store is unreachable): the waits go on
            }
        }
    }

    /// The `ok` reply to a lock request; with the fencing token for an acquisition.
    private static func lockReply(_ requestID: UInt64?, channel: String, lockName: String, detail: LockDetail?) -> Frame {
        var frame = Frame(type: .ok, id: requestID, channel: channel)
        frame.lockName = lockName
        if let detail, !detail.owner.isEmpty { frame.fencingToken = detail.fencingToken }
        return frame
    }

    /// Releases what is due (any node may) and tries the waits again (a release may have been
    /// announced while this node was not listening): the `lockSweep` timer, every
    /// `lockSweepInterval`. One sweep at a time.
    func sweepLocks() {
        guard locks.claimSweep() else { return }
        locks.enqueue { [self] in
            locks.sweepStarted()
            do {
                await lockChanged(try await locks.store.sweep(), local: true)
            } catch {
                logger.debug("lock sweep failed", metadata: ["error": "\(error)"])
            }
            for key in locks.awaited { await grantWaiters(of: key) }
        }
    }

    /// Follows the other nodes' lock changes (none on one node).
    func followLocks() {
        locks.store.followLocks { [self] changes in
            locks.enqueue { [self] in await lockChanged(changes, local: false) }
        }
    }

    /// A lock owner's change, told to the lock store.
    func lockOwnerChanged(_ user: UserKey, _ change: HubAction.LockOwnerChange) {
        switch change {
        case .lost(let connection): lockOwnerLost(connection, user: user)
        case .online: lockOwnerOnline(user)
        case .loggedOut(let connection): lockOwnerLoggedOut(connection, user: user)
        }
    }

    /// The user behind `connection` is declared offline here (P-1: it entered its grace
    /// window): its locks are due `ttl` from now; its waits end.
    private func lockOwnerLost(_ connection: ConnectionRef, user: UserKey) {
        locks.endWaits { $0.connection == connection }
        locks.enqueue { [self] in
            do { try await locks.store.ownerOffline(appId: user.appId, user: user.userId) } catch {
                logger.warning("could not mark the locks of an offline user", metadata: ["user": "\(user.userId)", "error": "\(error)"])
            }
        }
    }

    /// A user logged in (or resumed) here: its locks are no longer due, and are on this node.
    private func lockOwnerOnline(_ user: UserKey) {
        locks.enqueue { [self] in
            do { try await locks.store.ownerOnline(appId: user.appId, user: user.userId) } catch {
                logger.warning("could not keep the locks of a returning user", metadata: ["user": "\(user.userId)", "error": "\(error)"])
            }
        }
    }

    /// Logout (H-4) or an administrator's kick: the user's locks are released at once, the
    /// waits of the connection that served it end.
    private func lockOwnerLoggedOut(_ connection: ConnectionRef?, user: UserKey) {
        if let connection { locks.endWaits { $0.connection == connection } }
        locks.enqueue { [self] in
            do { await lockChanged(try await locks.store.releaseAll(appId: user.appId, user: user.userId), local: true) } catch {
                logger.warning("could not release the locks of a user whose session ended", metadata: ["user": "\(user.userId)", "error": "\(error)"])
            }
        }
    }

    /// The survivors declared `node` dead: its users' locks are due `ttl`
    /// from now, as if each owner had gone offline then.
    func lockNodeDied(_ node: String) {
        locks.enqueue { [self] in
            do { try await locks.store.nodeDied(node) } catch {
                logger.warning("could not mark the locks of a dead node", metadata: ["node": "\(node)", "error": "\(error)"])
            }
        }
    }
}
