import NIOConcurrencyHelpers
import RTMProtocol

/// This node's side of the locks (§2.12), on one node and in a cluster alike: the store holds
/// the locks (`MemoryLockStore` on one node, the database's in a cluster); this holds what only
/// this node can: the `acquireLock(retry: true)` waiters (they are its connections) and one
/// serial queue of store calls, so that this node's calls reach the store in the order they
/// were made (an owner lost then back: offline, then online; a release, then the hand-over to
/// the first waiter). The logic is in `Hub+Locks`.
final class LockService: Sendable {
    /// An `acquireLock(retry: true)` caller, first come first served.
    struct Waiter: Sendable {
        let connection: ConnectionRef
        let userId: String
        let requestID: UInt64?
    }

    /// A lock operation as a request asks for it: the store's operation, and for an
    /// acquisition whether to wait while the lock is held.
    struct Request: Sendable {
        var operation: SharedLockOperation
        var waits = false

        /// The request's frame type (what its refusals are counted by).
        var frameType: FrameType {
            switch operation {
            case .set: .setLock
            case .acquire: .acquireLock
            case .release: .releaseLock
            case .revoke: .revokeLock
            case .remove: .removeLock
            }
        }
    }

    /// A lock of a channel.
    struct LockKey: Hashable, Sendable {
        let appId: String
        let channel: String
        let name: String
    }

    let store: any SharedLockStore
    private let waiting = NIOLockedValueBox<[LockKey: [Waiter]]>([:])
    private let jobs: AsyncStream<@Sendable () async -> Void>.Continuation
    private let worker: Task<Void, Never>
    /// A sweep is queued and not yet run (the timer does not pile sweeps up behind a slow store).
    private let sweepQueued = NIOLockedValueBox(false)

    init(store: any SharedLockStore) {
        self.store = store
        let (stream, jobs) = AsyncStream<@Sendable () async -> Void>.makeStream()
        self.jobs = jobs
        self.worker = Task {
            for await job in stream { await job() }
        }
    }

    /// Stops running jobs (shutdown): those already queued run, later ones are dropped.
    func stop() async {
        jobs.finish()
        await worker.value
    }

    /// Whether a new sweep should be queued (false while one is waiting to run).
    func claimSweep() -> Bool {
        sweepQueued.withLockedValue { queued in defer { queued = true }; return !queued }
    }

    /// The queued sweep is starting.
    func sweepStarted() {
        sweepQueued.withLockedValue { $0 = false }
    }

    /// Runs `job` after every job enqueued before it.
    func enqueue(_ job: @escaping @Sendable () async -> Void) {
        jobs.yield(job)
    }

    /// Adds a waiter; a second wait from the same connection replaces the first, which is
    /// returned (to be told it was superseded).
    func wait(_ waiter: Waiter, for key: LockKey) -> Waiter? {
        waiting.withLockedValue { waiting in
            var list = waiting[key] ?? []
            let superseded = list.first { $0.connection == waiter.connection }
            list.removeAll { $0.connection == waiter.connection }
            list.append(waiter)
            waiting[key] = list
            return superseded
        }
    }

    /// The first waiter of a lock (nil: none).
    func firstWaiter(of key: LockKey) -> Waiter? {
        waiting.withLockedValue { $0[key]?.first }
    }

    /// Removes a lock's first waiter if it is still `waiter` (granted, or gone).
    func removeFirst(_ waiter: Waiter, of key: LockKey) {
        waiting.withLockedValue { waiting in
            guard let first = waiting[key]?.first, first.connection == waiter.connection,
                  first.requestID == waiter.requestID else { return }
            waiting[key]?.removeFirst()
            if waiting[key]?.isEmpty == true { waiting[key] = nil }
        }
    }

    /// Removes and returns every waiter of a lock (it was removed).
    func removeAll(of key: LockKey) -> [Waiter] {
        waiting.withLockedValue { $0.removeValue(forKey: key) ?? [] }
    }

    /// Ends the waits of a connection, or of a user (its session ended).
    func endWaits(where ends: (Waiter) -> Bool) {
        waiting.withLockedValue { waiting in
            for key in Array(waiting.keys) {
                waiting[key]?.removeAll(where: ends)
                if waiting[key]?.isEmpty == true { waiting[key] = nil }
            }
        }
    }

    /// The locks this node's connections wait for.
    var awaited: [LockKey] { waiting.withLockedValue { Array($0.keys) } }
}
