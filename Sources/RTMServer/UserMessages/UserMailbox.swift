import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RTMProtocol

/// The one owner of user (peer-to-peer) message delivery (SPEC M-1): it stores each message
/// durably before the sender's answer, delivers it to the receiver's connection in order,
/// re-delivers everything unacknowledged when the receiver logs in again, and forgets a message
/// only when the receiver's SDK acknowledges it.
///
/// The rules are a value, `UserMailboxState`, held behind one lock: every call is an event that
/// returns actions, performed here after the lock is released (`run`). The store's blocking
/// calls run on the store's own thread (`UserMessageStore+Calls`), whose callbacks are events
/// too; the wake-ups the state asks for run on `timers`. Whatever arrives while a commit runs
/// goes into the next transaction (group commit sized by load), and the mailbox takes new
/// messages while the store commits (a pipeline).
///
/// Hand-offs (thread, queue or loop hops) from a `sendUser` read on its connection's event loop.
/// The loop runs `send` under the lock. While a commit runs (any load), the message joins the
/// next one, which the end of that commit hands to the store's thread: **1** hand-off to the
/// commit. The commit's end, on the store's thread, starts the next commit and hands the ended
/// one to the mailbox's own thread (`settler`), which works out its answers and deliveries (the
/// per-message work: the store's thread, the one serial stage, does only the store's) and hands
/// each event loop its part: **3** to the sender's reply being written. When nothing waits for
/// a next commit (the store's thread would idle), the store's thread settles the commit itself:
/// **2**. A message that finds the store idle waits for the commit delay
/// (`userMessageCommitDelay`, 1 ms by default), whose wake-up runs on `timers`: one more each (2
/// and 3; 1 and 2 with no delay). Before this shape (a mailbox queue and a writer queue): 3 to
/// the commit and 5 to the reply when idle, 2 and 4 under load.
final class UserMailbox: Sendable {
    /// What the sender is told.
    struct Receipt: Sendable {
        /// The store's id of the message.
        let id: Int64
        /// Whether the receiver had a connection (on any node) when the message was committed.
        let receiverOnline: Bool
    }

    typealias Reply = @Sendable (Result<Receipt, any Error>) -> Void

    /// Where a sender's answer goes.
    enum ReplyTo: Sendable {
        /// A callback (JSON requests, the admin API).
        case callback(Reply)
        /// A binary `sendUser` reply (`0x83`) on this connection: the replies of one commit to
        /// one connection travel in one frame, encoded on its event loop.
        /// `tellsStatus`: the reply says whether the receiver is online (the sender has `status`
        /// on it).
        case binary(ConnectionRef, requestID: UInt64, tellsStatus: Bool)
    }

    /// One `sendUser` to store.
    struct Submission: Sendable {
        /// The message (its `id` is assigned by the store; its `clientMsgId`, the sender's
        /// message id, M-3, deduplicates resends).
        var message: StoredUserMessage
        /// Where the receipt goes.
        var reply: ReplyTo
    }

    /// What the lock guards: the state, and the owner's own waiters and hook.
    private struct Locked {
        var machine: UserMailboxState
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        /// Of the given receivers (not online here), those logged in on another node (none on a
        /// single node), for the receipts' `receiverOnline`.
        var onlineElsewhere: (@Sendable (Set<UserKey>) -> Set<UserKey>)?
        /// Events handed to `settler` and not yet performed (their writes issued).
        var atSettler = 0

        /// Nothing waits, no commit runs and nothing is left to settle (`drain`).
        var isIdle: Bool { machine.isIdle && atSettler == 0 }

        /// The `drain`s to resume now, if idle (taken from the list).
        mutating func idleWaiters() -> [CheckedContinuation<Void, Never>] {
            guard !drainWaiters.isEmpty, isIdle else { return [] }
            defer { drainWaiters = [] }
            return drainWaiters
        }
    }

    private let state: NIOLockedValueBox<Locked>
    let store: any UserMessageStore
    /// Where the state's wake-ups run, and its clock.
    private let timers: any EventLoop
    /// Where ended commits and reads are settled (answers and deliveries worked out), one at a
    /// time, in the order they ended: the only thread that works out deliveries, so they reach
    /// each loop in the store's order.
    private let settler = DispatchQueue(label: "rtm.user-mailbox")
    private let cap: Int
    private let maxAgeMillis: Int64
    /// How long the store recognises a resend (ms, SPEC M-3).
    private let resendWindowMillis: Int64
    let logger: Logger
    private let metrics: ServerMetrics?
    /// Told how many messages for a receiver were dropped undelivered (cap or age, M-1), when
    /// the store reports them (the receiver's next login): the `userMessageUndeliverable` webhook.
    let onUndeliverable: (@Sendable (UserKey, Int) -> Void)?

    /// - Parameters:
    ///   - commitDelay: how long a message that finds the store idle waits for company.
    ///   - deadline: how long a submitted message may wait for its answer.
    ///   - timers: where wake-ups run (a test's loop can advance its own clock).
    init(store: any UserMessageStore, cap: Int, maxAge: TimeAmount, dedupCapacity: Int, resendWindow: TimeAmount = .seconds(60),
         commitDelay: TimeAmount = .zero, deadline: TimeAmount = .seconds(10), timers: (any EventLoop)? = nil, logger: Logger,
         metrics: ServerMetrics? = nil, onUndeliverable: (@Sendable (UserKey, Int) -> Void)? = nil) {
        self.store = store
        self.cap = cap
        self.maxAgeMillis = maxAge.nanoseconds / 1_000_000
        self.resendWindowMillis = resendWindow.nanoseconds / 1_000_000
        self.timers = timers ?? MultiThreadedEventLoopGroup.singleton.next()
        self.logger = logger
        self.metrics = metrics
        self.onUndeliverable = onUndeliverable
        let configuration = UserMailboxState.Configuration(dedupCapacity: dedupCapacity, commitDelay: commitDelay, deadline: deadline,
                                                           storeEpoch: store.epoch)
        self.state = NIOLockedValueBox(Locked(machine: UserMailboxState(configuration: configuration)))
    }

    /// Sets how receivers online on other nodes are found (once, before the server takes
    /// connections).
    func setOnlineElsewhere(_ lookup: @escaping @Sendable (Set<UserKey>) -> Set<UserKey>) {
        state.withLockedValue { $0.onlineElsewhere = lookup }
    }

    // MARK: events

    /// Stores `message` durably, then replies (after the commit) and delivers it if the receiver
    /// is online. A resend with the same `clientMsgId` from the same sender is answered with the
    /// first receipt and not stored again (M-3).
    func send(_ message: StoredUserMessage, from sender: UserKey, clientMsgId: UInt64?, reply: @escaping Reply) {
        var message = message
        message.clientMsgId = clientMsgId
        send([Submission(message: message, reply: .callback(reply))], from: sender)
    }

    /// Stores several messages of one sender (what one read of its connection brought); each is
    /// answered after the commit that holds it.
    func send(_ batch: [Submission], from sender: UserKey) {
        guard !batch.isEmpty else { return }
        metrics?.userMessagesIn(batch.count)
        let now = timers.now
        event { $0.send(batch, from: sender, now: now) }
    }

    /// The receiver acknowledged every message up to `id` on `connection` (SPEC M-1).
    func acknowledge(_ key: UserKey, upTo id: Int64, on connection: ConnectionRef) {
        let now = timers.now
        event { $0.acknowledge(key, upTo: id, on: connection, now: now) }
    }

    /// A connection of `key` logged in: send it every waiting message (and how many were
    /// dropped), then deliver new ones to it as they are committed.
    func attach(_ key: UserKey, connection: ConnectionRef, binary: Bool = false) {
        event { $0.attach(key, connection: connection, binary: binary) }
    }

    /// That connection is gone: messages wait in the store until the next `attach`.
    func detach(_ key: UserKey, connection: ConnectionRef) {
        state.withLockedValue { $0.machine.detach(key, connection: connection) }
    }

    /// Starts following the other nodes' commits (nothing to follow on a single node).
    func startFollowing() {
        store.follow { [weak self] receivers in
            self?.event { $0.othersCommitted(receivers?.map { UserKey(appId: $0.appId, userId: $0.userId) }) }
        }
    }

    /// Stops following and closes the store (after `drain`).
    func stopFollowing() async {
        await store.stop()
    }

    /// Waits until everything submitted so far has been committed, and every commit's and
    /// read's end handed to the settler so far has been settled (its writes issued) (tests,
    /// shutdown).
    func drain() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = timers.now
            let (actions, idle) = state.withLockedValue { locked in
                let actions = locked.machine.flush(now: now)
                if !locked.isIdle { locked.drainWaiters.append(continuation) }
                return (actions, locked.isIdle)
            }
            run(actions)
            if idle { continuation.resume() }
        }
    }

    // MARK: figures

    /// User messages stored since start (the admin API's counters).
    var storedCount: UInt64 { state.withLockedValue { $0.machine.storedCount } }

    /// How many senders' message ids are remembered in memory (tests: bounded by the senders
    /// with a connection).
    var rememberedSenders: Int { state.withLockedValue { $0.machine.rememberedSenders } }

    /// Completes `promise` with the number of user messages waiting for the next commit.
    func queueDepth(_ promise: EventLoopPromise<Int>) {
        promise.succeed(state.withLockedValue { $0.machine.waitingCount })
    }

    // MARK: running

    /// Runs one event under the lock, then its actions (and resumes `drain`s it left idle).
    /// A commit's end that asks to be settled is settled here, at once, when no next commit was
    /// started (the store's thread has nothing else to do: no hop, as before the settler) and
    /// nothing waits at the settler (which would then be behind it); otherwise it goes to the
    /// settler. Only the store's thread hands work to the settler (commit and read ends), so the
    /// check holds until this event's writes are issued.
    private func event(_ body: (inout UserMailboxState) -> UserMailboxState.Actions) {
        typealias Taken = (UserMailboxState.Actions, (@Sendable (Set<UserKey>) -> Set<UserKey>)?, [CheckedContinuation<Void, Never>])
        let (actions, lookup, waiters) = state.withLockedValue { locked -> Taken in
            var actions = body(&locked.machine)
            if actions.settle {
                if actions.commit == nil, locked.atSettler == 0 {
                    actions.settle = false
                    actions.append(locked.machine.settle())
                } else {
                    locked.atSettler += 1
                }
            }
            return (actions, locked.onlineElsewhere, locked.idleWaiters())
        }
        run(actions, onlineElsewhere: lookup)
        for waiter in waiters { waiter.resume() }
    }

    /// Performs `actions`, in their order (`UserMailboxState.Actions`).
    private func run(_ actions: UserMailboxState.Actions, onlineElsewhere: (@Sendable (Set<UserKey>) -> Set<UserKey>)? = nil) {
        guard !actions.isEmpty else { return }
        for refusal in actions.refusals { refuse(refusal) }
        for report in actions.dropped { tellDropped(report) }
        if !actions.answers.isEmpty || !actions.deliveries.isEmpty {
            write(actions.answers, actions.deliveries, onlineElsewhere: onlineElsewhere)
        }
        if let request = actions.commit { commit(request) }
        if actions.settle {
            atSettler { $0.settle() }
        }
        for read in actions.reads { self.read(read) }
        if !actions.newest.isEmpty { lookUpNewest(actions.newest) }
        if let at = actions.wake {
            timers.scheduleTask(deadline: at) { [self] in
                let now = timers.now
                event { $0.wake(now: now) }
            }
        }
    }

    /// Answers senders (callbacks at once) and hands each event loop with work the replies and
    /// deliveries to write (after any `dropped` report to the same connection: it was queued
    /// first). Whether a receiver not online here is online elsewhere is asked once for all.
    private func write(_ answers: [UserMailboxState.Answer], _ deliveries: [UserMailboxState.Delivery],
                       onlineElsewhere: (@Sendable (Set<UserKey>) -> Set<UserKey>)?) {
        var elsewhere: Set<UserKey> = []
        if let onlineElsewhere {
            let away = Set(answers.lazy.compactMap(\.away))
            if !away.isEmpty { elsewhere = onlineElsewhere(away) }
        }
        let writes = UserMessageWrites(answers: answers, deliveries: deliveries, elsewhere: elsewhere, epoch: store.epoch)
        for answer in answers {
            if case .callback(let callback) = answer.reply { callback(.success(UserMessageWrites.receipt(answer, elsewhere: elsewhere))) }
        }
        if !deliveries.isEmpty { metrics?.userMessagesOut(deliveries.count) }
        writes.start()
    }

    private func commit(_ request: UserMailboxState.CommitRequest) {
        store.commit(request, cap: cap, resendsSince: Self.wallMillis - resendWindowMillis, metrics: metrics,
                     begins: { [self] in state.withLockedValue { $0.machine.commitBegins(request.id) } },
                     ended: { [self] result in
            let outcome: UserMailboxState.CommitOutcome
            switch result {
            case nil:
                outcome = .notBegun
            case .success(let committed)?:
                outcome = .committed(committed)
            case .failure(let error)?:
                logger.error("storing user messages failed", metadata: ["count": "\(request.messages.count)",
                                                                        "error": "\(ClusterCommitFailure.logDescription(error))"])
                // A store call that ran out of time ran out of the message's: the reason names
                // the message's deadline, not what was left of it.
                outcome = .failed(reason: store.refusalReason(for: error), timedOut: error is any DatabaseTimeout)
            }
            let now = timers.now
            event { $0.commitEnded(request.id, outcome, now: now) }
        })
    }

    /// Runs `event` on the settler (counted in `atSettler` by the caller), then counts it done
    /// (and resumes the `drain`s that waited for it).
    private func atSettler(_ body: @escaping @Sendable (inout UserMailboxState) -> UserMailboxState.Actions) {
        settler.async { [self] in
            event(body)
            let waiters = state.withLockedValue { locked in
                locked.atSettler -= 1
                return locked.idleWaiters()
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// The read's end is settled where commits are (`settler`), behind the commits that ended
    /// before it: deliveries are worked out on one thread, in the store's order.
    private func read(_ read: UserMailboxState.Read) {
        store.read(read, notBefore: Self.wallMillis - maxAgeMillis) { [self] result in
            if case .failure(let error) = result {
                logger.warning("reading a receiver's user messages failed",
                               metadata: ["user": "\(read.key.userId)", "error": "\(ClusterCommitFailure.logDescription(error))"])
            }
            let found = try? result.get()
            state.withLockedValue { $0.atSettler += 1 }
            atSettler { $0.readEnded(read, found) }
        }
    }

    private func lookUpNewest(_ keys: [UserKey]) {
        store.newest(keys) { [self] result in
            switch result {
            case .success(let newest):
                event { $0.newestFound(newest) }
            case .failure(let error):
                logger.debug("checking for other nodes' user messages failed", metadata: ["error": "\(ClusterCommitFailure.logDescription(error))"])
            }
        }
    }

    /// A refusal, the same reason on every route (callbacks get it as a `UserMessageRefused`).
    private func refuse(_ refusal: UserMailboxState.Refusal) {
        switch refusal.reply {
        case .callback(let reply):
            reply(.failure(UserMessageRefused(description: refusal.reason)))
        case .binary(let connection, let requestID, _):
            metrics?.refused(.channelReceiverOfflineAndMessageStoreFailed, operation: .sendUser)
            Hub.send(.error(id: requestID, .channelReceiverOfflineAndMessageStoreFailed, refusal.reason), on: connection.channel)
        }
    }

    /// Tells a receiver, before the messages that follow, that messages were dropped (never
    /// silent, SPEC M-1).
    private func tellDropped(_ report: UserMailboxState.DroppedReport) {
        if report.whileOnline {
            logger.warning("user messages dropped for an online receiver before its node could read them",
                           metadata: ["user": "\(report.key.userId)", "count": "\(report.count)"])
            store.forgetDropped(report.key)
        }
        Hub.send(Frame(type: .dropped, channelType: "user", ts: Self.wallMillis, epoch: report.epoch, count: report.count),
                 on: report.connection.channel)
        onUndeliverable?(report.key, report.count)
    }

    static var wallMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}

/// Why a user message was refused, in the words its sender gets (`UserMailbox.refuse`).
struct UserMessageRefused: Error, CustomStringConvertible {
    let description: String
}
