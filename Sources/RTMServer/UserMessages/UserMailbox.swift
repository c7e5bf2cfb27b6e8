import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import RTMProtocol

/// The one owner of user (peer-to-peer) message delivery (SPEC M-1): it stores each message
/// durably before the sender's acknowledgement, delivers it to the receiver's connection in
/// order, re-delivers everything unacknowledged when the receiver logs in again, and forgets a
/// message only when the receiver's SDK acknowledges it.
///
/// Bookkeeping (the table of online receivers, deduplication, the order of deliveries) runs on
/// one serial queue; the store is used only from a second one, the writer, which runs one
/// transaction at a time. The two form a pipeline: while the writer commits, the mailbox takes
/// new messages and answers the previous commit. Whatever arrives while a commit runs goes into
/// the next transaction (group commit sized by load: one message when idle, thousands when busy).
final class UserMailbox: @unchecked Sendable {
    /// What the sender is told.
    struct Receipt: Sendable {
        /// The store's id of the message.
        let id: Int64
        /// Whether the receiver had a connection when the message was committed.
        let receiverOnline: Bool
    }

    typealias Reply = @Sendable (Result<Receipt, any Error>) -> Void

    /// Where a sender's answer goes.
    enum ReplyTo: Sendable {
        /// A callback (JSON requests, history stores).
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

    /// An online receiver: its connection and the form its deliveries take.
    struct Receiver: Sendable {
        let connection: ConnectionRef
        let binary: Bool
        /// Logging in: its waiting messages are being read; live deliveries wait here until they
        /// are sent, so that everything arrives in store order.
        var held: [StoredUserMessage]?
        /// Shared store (cluster): the highest id delivered to this connection.
        var delivered: Int64 = 0
        /// Shared store: the mailbox epoch of `delivered` (ids are dense within one epoch).
        var deliveredEpoch: String?

        /// Shared store: `message` is the last delivered to this connection.
        mutating func markDelivered(_ message: StoredUserMessage, storeEpoch: String) {
            delivered = message.id
            deliveredEpoch = message.epoch ?? storeEpoch
        }
    }

    private struct Pending {
        let submission: Submission
        let sender: UserKey
        /// When it must be answered (`deadline` after its arrival).
        let due: NIODeadline
    }

    let queue = DispatchQueue(label: "rtm.mailbox")
    /// The only user of `store`: one transaction (or login read) at a time, in submission order.
    let writer = DispatchQueue(label: "rtm.mailbox.writer")
    let store: any UserMessageStore
    /// The store when several nodes share it (cluster mode): deliveries follow its per-receiver
    /// id order (`UserMailbox+Cluster`). nil: a single node, the plain path.
    let shared: (any SharedUserMessageStore)?
    private let cap: Int
    let maxAgeMillis: Int64
    let logger: Logger
    private let dedupCapacity: Int
    /// How long the store recognises a resend (ms, SPEC M-3).
    private let resendWindowMillis: Int64
    /// How long a message that finds the store idle waits for company (`userMessageCommitDelay`).
    private let commitDelay: TimeAmount

    // Confined to `queue`.
    var online: [UserKey: Receiver] = [:]
    /// Shared store: receivers being re-read, and those to re-read once that ends.
    var syncing: Set<UserKey> = []
    var syncAgain: Set<UserKey> = []
    private var pending: [Pending] = []
    /// A wake-up for late messages is scheduled (`scheduleExpiry`).
    private var expiryScheduled = false
    /// How long a submitted message may wait for its answer (`ServerConfiguration.userMessageDeadline`).
    private let deadline: TimeAmount
    private var acks: [UserKey: Int64] = [:]
    private var flushScheduled = false
    /// A commit is running on `writer`; the next flush starts when it ends.
    private var committing = false
    /// The commit with messages on `writer` (or waiting for it): answered at `due` if it has not
    /// ended by then (`scheduleDeadline`).
    private var inFlight: (batch: [Pending], ticket: CommitTicket, due: NIODeadline)?
    private var deadlineScheduled = false
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    private var recent: [UserKey: RecentIDs<Receipt>] = [:]
    /// User messages stored since start (the admin API's counters).
    let storedCount = NIOLockedValueBox<UInt64>(0)

    private let metrics: ServerMetrics?
    /// Told how many messages for a receiver were dropped undelivered (cap or age, M-1), when
    /// the store reports them (the receiver's next login): the `userMessageUndeliverable` webhook.
    let onUndeliverable: (@Sendable (UserKey, Int) -> Void)?
    /// Of the given receivers (not online here), those logged in on another node (none on a single node),
    /// for the receipts' `receiverOnline`. Set once by the hub before the first send.
    private(set) var onlineElsewhere: (@Sendable (Set<UserKey>) -> Set<UserKey>)?

    /// Sets `onlineElsewhere` (once, before the server takes connections).
    func setOnlineElsewhere(_ lookup: @escaping @Sendable (Set<UserKey>) -> Set<UserKey>) {
        queue.sync { onlineElsewhere = lookup }
    }

    init(store: any UserMessageStore, cap: Int, maxAge: TimeAmount, dedupCapacity: Int, resendWindow: TimeAmount = .seconds(60),
         commitDelay: TimeAmount = .zero, deadline: TimeAmount = .seconds(10), logger: Logger, metrics: ServerMetrics? = nil,
         onUndeliverable: (@Sendable (UserKey, Int) -> Void)? = nil) {
        self.metrics = metrics
        self.onUndeliverable = onUndeliverable
        self.store = store
        self.shared = store as? any SharedUserMessageStore
        self.cap = cap
        self.maxAgeMillis = maxAge.nanoseconds / 1_000_000
        self.dedupCapacity = dedupCapacity
        self.resendWindowMillis = resendWindow.nanoseconds / 1_000_000
        self.commitDelay = commitDelay
        self.deadline = deadline
        self.logger = logger
    }

    /// Stores `message` durably, then replies (after the commit) and delivers it if the receiver
    /// is online. A resend with the same `clientMsgId` from the same sender is answered with the
    /// first receipt and not stored again (M-3).
    func send(_ message: StoredUserMessage, from sender: UserKey, clientMsgId: UInt64?, reply: @escaping Reply) {
        var message = message
        message.clientMsgId = clientMsgId
        send([Submission(message: message, reply: .callback(reply))], from: sender)
    }

    /// Stores several messages of one sender (what one read of its connection brought) with one
    /// hop onto the mailbox's queue; each is answered after the commit that holds it.
    func send(_ batch: [Submission], from sender: UserKey) {
        guard !batch.isEmpty else { return }
        metrics?.userMessagesIn(batch.count)
        let due = NIODeadline.now() + deadline
        queue.async { [self] in
            var repeated: [(ReplyTo, Receipt)] = []
            for submission in batch {
                if let id = submission.message.clientMsgId, let receipt = recent[sender]?[id] {
                    repeated.append((submission.reply, receipt))
                } else {
                    pending.append(Pending(submission: submission, sender: sender, due: due))
                }
            }
            if !repeated.isEmpty { answer(repeated) }
            scheduleFlush()
            if committing { scheduleExpiry() }   // it waits for a commit that may take long
        }
    }

    /// The receiver acknowledged every message up to `id` on `connection`: they are deleted
    /// (batched). Only what was written to that connection can be acknowledged through it: an
    /// id above it counts as the highest one written, and a connection no longer (or not yet)
    /// attached acknowledges nothing (its messages come again on the one that is, SPEC M-1).
    func acknowledge(_ key: UserKey, upTo id: Int64, on connection: ConnectionRef) {
        queue.async { [self] in
            guard online[key]?.connection === connection else { return }
            let upTo = min(id, connection.highestUserMessageSent)
            guard upTo > 0 else { return }
            acks[key] = max(acks[key] ?? 0, upTo)
            scheduleFlush()
        }
    }

    /// Records that `messages` are being written to `connection`
    /// (`ConnectionRef.highestUserMessageSent`, confined to `queue`). On `queue`.
    private func noteSent(_ messages: some Sequence<StoredUserMessage>, to connection: ConnectionRef) {
        for message in messages where message.id > connection.highestUserMessageSent {
            connection.highestUserMessageSent = message.id
        }
    }

    /// A connection of `key` logged in: send it every waiting message (and how many were
    /// dropped), then deliver new ones to it as they are committed.
    func attach(_ key: UserKey, connection: ConnectionRef, binary: Bool = false) {
        queue.async { [self] in
            // Online at once (receipts say so); live deliveries are held until the waiting
            // messages, read on the writer after every commit already submitted, are sent.
            online[key] = Receiver(connection: connection, binary: binary, held: [])
            let notBefore = Self.wallMillis - maxAgeMillis
            writer.async { [self] in
                let result = Result { () throws -> (dropped: Int, waiting: [StoredUserMessage]) in
                    let dropped = try store.takeDropped(appId: key.appId, receiver: key.userId)
                    let waiting = try store.pending(appId: key.appId, receiver: key.userId, notBefore: notBefore)
                    return (dropped + (try store.takeDropped(appId: key.appId, receiver: key.userId)), waiting)
                }
                queue.async { [self] in
                    if case .success(let read) = result, read.dropped > 0 { onUndeliverable?(key, read.dropped) }
                    attached(key, connection: connection, result)
                }
            }
        }
    }

    /// The waiting messages of a login were read: sends them, then what was held meanwhile.
    private func attached(_ key: UserKey, connection: ConnectionRef, _ result: Result<(dropped: Int, waiting: [StoredUserMessage]), any Error>) {
        guard var receiver = online[key], receiver.connection === connection else { return }   // gone or replaced meanwhile
        let held = receiver.held ?? []
        receiver.held = nil
        online[key] = receiver
        switch result {
        case .success(let (dropped, waiting)):
            if dropped > 0 {
                Hub.send(Frame(type: .dropped, channelType: "user", ts: Self.wallMillis, epoch: store.epoch, count: dropped), on: connection.channel)
            }
            // Held messages were committed before the read too: send only those it missed.
            let last = waiting.last?.id ?? 0
            if shared != nil {
                deliverShared(waiting, held: held.filter { $0.id > last }, key: key)
                if syncAgain.remove(key) != nil { sync(key) }   // other nodes committed meanwhile
            } else {
                deliver(waiting + held.filter { $0.id > last }, to: receiver)
            }
        case .failure(let error):
            logger.error("reading waiting user messages failed", metadata: ["user": "\(key.userId)", "error": "\(ClusterCommitFailure.logDescription(error))"])
            deliver(held, to: receiver)
        }
    }

    /// That connection is gone: messages wait in the store until the next `attach`.
    func detach(_ key: UserKey, connection: ConnectionRef) {
        queue.async { [self] in
            if online[key]?.connection === connection {
                online[key] = nil
                // Its receipts for resends are kept by the store from now on (bounded memory).
                recent[key] = nil
            }
        }
    }

    /// How many senders' message ids are remembered in memory (tests: bounded by the senders
    /// with a connection).
    var rememberedSenders: Int { queue.sync { recent.count } }

    /// Completes `promise` with the number of user messages waiting for the next commit.
    func queueDepth(_ promise: EventLoopPromise<Int>) {
        queue.async { [self] in promise.succeed(pending.count) }
    }

    /// Waits until everything submitted so far has been committed (tests, shutdown).
    func drain() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                drainWaiters.append(continuation)
                flush()
                resumeDrainWaiters()
            }
        }
    }

    // MARK: internals (on `queue`)

    private func scheduleFlush() {
        guard !flushScheduled, !committing else { return }   // a running commit flushes when it ends
        flushScheduled = true
        // Queued behind whatever is already waiting on the queue, so those join this commit;
        // with a commit delay, also whatever arrives within it (group commit at a light load:
        // one commit, and one round of thread hand-offs, for several messages).
        guard commitDelay > .zero else {
            queue.async { [self] in flush() }
            return
        }
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(commitDelay.nanoseconds))) { [self] in flush() }
    }

    private func resumeDrainWaiters() {
        guard !committing, pending.isEmpty, acks.isEmpty else { return }
        let waiters = drainWaiters
        drainWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// Hands everything gathered to the writer as one transaction, unless one is running.
    private func flush() {
        flushScheduled = false
        guard !committing else { return }
        // Messages whose time ran out while earlier commits held the store are refused unsent
        // (nothing stored): their senders get an answer within the deadline.
        let now = NIODeadline.now()
        expireLate(now: now)
        guard !pending.isEmpty || !acks.isEmpty else { return }
        let batch = pending
        let acknowledgements = acks.map { (appId: $0.key.appId, receiver: $0.key.userId, upTo: $0.value) }
        pending = []
        acks = [:]
        committing = true
        let messages = batch.map(\.submission.message)
        let resendsSince = Self.wallMillis - resendWindowMillis
        // The commit may take only what its oldest message has left (acknowledgements alone: a
        // whole deadline).
        let due = batch.first?.due ?? (now + deadline)   // in arrival order: the first is the oldest
        // The senders are answered by `due` whatever the writer is doing (a read or an earlier
        // commit ahead of this one, a connection that never answers): one clock, the deadline's.
        let ticket = CommitTicket()
        if !batch.isEmpty {
            inFlight = (batch, ticket, due)
            scheduleDeadline()
        }
        writer.async { [self] in
            guard ticket.start() else {
                // Its senders were refused before it began: nothing of it is stored; its
                // acknowledgements go into the next commit.
                queue.async { [self] in
                    committing = false
                    inFlight = nil
                    for (appId, receiver, upTo) in acknowledgements {
                        let key = UserKey(appId: appId, userId: receiver)
                        acks[key] = max(acks[key] ?? 0, upTo)
                    }
                    flush()
                    resumeDrainWaiters()
                }
                return
            }
            let started = NIODeadline.now()
            let result = Result {
                try store.commit(messages, acknowledgements: acknowledgements, cap: cap, resendsSince: resendsSince, before: due)
            }
            metrics?.storeCommitted(nanoseconds: (NIODeadline.now() - started).nanoseconds)
            let answered = ticket.finish()
            queue.async { [self] in
                committing = false
                inFlight = nil
                committed(batch, result, answered: answered)
                flush()   // what arrived meanwhile
                resumeDrainWaiters()
            }
        }
    }

    /// While a commit with messages is in flight, one wake-up at its deadline (commits are one
    /// at a time, and nearly all end long before it: the wake-up then finds the next one, or
    /// none). At the deadline the senders of a commit that has not ended are answered: refused
    /// with nothing stored if it has not begun (it never will), or with the outcome unknown if
    /// it runs (SPEC M-3: a resend with the same msgId is recognised whatever the commit does).
    private func scheduleDeadline() {
        guard !deadlineScheduled, let due = inFlight?.due else { return }
        deadlineScheduled = true
        let delay = max(0, (due - .now()).nanoseconds)
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay))) { [self] in
            deadlineScheduled = false
            if let (batch, ticket, due) = inFlight, due <= .now() {
                inFlight = nil
                switch ticket.expire() {
                case .abandoned:
                    refuse(batch, reason: notTakenInTime)
                case .answeredRunning:
                    refuse(batch, reason: unansweredInTime)
                case .alreadyDone:
                    break
                }
            }
            scheduleDeadline()
        }
    }

    /// Refuses, unsent (nothing stored), the waiting messages whose time ran out while earlier
    /// commits held the store: their senders get an answer within the deadline. Messages wait
    /// in arrival order, so the late ones are first.
    private func expireLate(now: NIODeadline) {
        guard let first = pending.first, first.due <= now else { return }
        let count = pending.prefix { $0.due <= now }.count
        let late = Array(pending.prefix(count))
        pending.removeFirst(count)
        refuse(late, reason: notTakenInTime)
    }

    /// While a commit runs, wakes when the oldest waiting message's time runs out (one wake-up
    /// at a time).
    private func scheduleExpiry() {
        guard !expiryScheduled, let due = pending.first?.due else { return }
        expiryScheduled = true
        let delay = max(0, (due - .now()).nanoseconds)
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay))) { [self] in
            expiryScheduled = false
            expireLate(now: .now())
            if committing { scheduleExpiry() }
            resumeDrainWaiters()
        }
    }

    /// Answers `batch` with an error, the same `reason` on every route (callbacks get it as a
    /// `UserMessageRefused`).
    private func refuse(_ batch: [Pending], reason: String) {
        for item in batch {
            switch item.submission.reply {
            case .callback(let reply):
                reply(.failure(UserMessageRefused(description: reason)))
            case .binary(let connection, let requestID, _):
                metrics?.refused(.channelReceiverOfflineAndMessageStoreFailed, operation: .sendUser)
                Hub.send(.error(id: requestID, .channelReceiverOfflineAndMessageStoreFailed, reason), on: connection.channel)
            }
        }
    }

    /// The refusal of a message whose commit had not begun by its deadline (it never will).
    private var notTakenInTime: String { "the message store did not take the message within \(Self.seconds(deadline)) s: nothing was stored; retry" }
    /// The refusal of a message whose commit ran past its deadline (M-3: a resend is recognised).
    private var unansweredInTime: String {
        "the message store did not answer within \(Self.seconds(deadline)) s: the outcome is unknown; resend with the same msgId"
    }

    private static func seconds(_ amount: TimeAmount) -> String {
        let value = Double(amount.nanoseconds) / 1e9
        return value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// A transaction ended: replies (only now, unless its deadline answered them already:
    /// `answered`), then deliveries.
    private func committed(_ batch: [Pending], _ result: Result<[CommittedUserMessage], any Error>, answered: Bool) {
        let results: [CommittedUserMessage]
        switch result {
        case .success(let committed):
            results = committed
            let stored = committed.lazy.filter { !$0.isResend }.count
            storedCount.withLockedValue { $0 &+= UInt64(stored) }
        case .failure(let error):
            logger.error("storing user messages failed", metadata: ["count": "\(batch.count)", "error": "\(ClusterCommitFailure.logDescription(error))"])
            guard !answered else { return }
            // The store says whether the commit may still have happened (M-3: the sender then
            // resends with the same msgId). A store call that ran out of time ran out of the
            // message's: the reason names the message's deadline, not what was left of it.
            refuse(batch, reason: error is any DatabaseTimeout
                ? unansweredInTime
                : store.refusalReason(for: error))
            return
        }
        var receipts: [(ReplyTo, Receipt)] = []
        receipts.reserveCapacity(batch.count)
        var deliveries: [(Receiver, StoredUserMessage)] = []
        deliveries.reserveCapacity(batch.count)
        // Receivers logged in on another node are online too (one look for the whole batch, for
        // the receivers not online here).
        var elsewhere: Set<UserKey> = []
        if let onlineElsewhere {
            let away = Set(batch.lazy.map { UserKey(appId: $0.submission.message.appId, userId: $0.submission.message.receiver) }
                .filter { self.online[$0] == nil })
            if !away.isEmpty { elsewhere = onlineElsewhere(away) }
        }
        for (item, result) in zip(batch, results) {
            let id = result.id
            var message = item.submission.message
            message.id = id
            message.epoch = result.epoch
            let key = UserKey(appId: message.appId, userId: message.receiver)
            let receiver = online[key]
            let receipt = Receipt(id: id, receiverOnline: receiver != nil || elsewhere.contains(key))
            // Remembered for senders with a connection here (a sender gone meanwhile would
            // leave an entry behind; the store answers its resends anyway).
            if let clientMsgId = item.submission.message.clientMsgId, online[item.sender] != nil {
                recent[item.sender, default: RecentIDs(capacity: dedupCapacity)].remember(clientMsgId, receipt)
            }
            if !answered { receipts.append((item.submission.reply, receipt)) }
            // A resend the store recognised (after a restart, through another node, or twice
            // in one batch): its first copy is delivered (or waits in the store), never this one.
            if result.isResend { continue }
            if let receiver {
                if receiver.held != nil {
                    online[key]!.held!.append(message)   // logging in: after its waiting messages
                } else if shared != nil {
                    // Cluster: only the next id in the receiver's order; a gap is another
                    // node's message, read (with this one) from the store.
                    if id == receiver.delivered + 1 {
                        online[key]!.markDelivered(message, storeEpoch: store.epoch)
                        deliveries.append((receiver, message))
                    } else {
                        sync(key)
                    }
                } else {
                    deliveries.append((receiver, message))
                }
            }
        }
        answer(receipts, deliveries: deliveries)
    }

    /// Sends receipts (callbacks at once) and deliveries. The binary replies and the deliveries
    /// are gathered per connection (one frame each where they fit) and per event loop: one hop
    /// per loop, whose task encodes and writes for every connection it serves, so a commit for
    /// a thousand receivers costs two wake-ups, not two thousand.
    private func answer(_ receipts: [(ReplyTo, Receipt)], deliveries: [(Receiver, StoredUserMessage)] = []) {
        var work: [Int: LoopWork] = [:]
        for (reply, receipt) in receipts {
            switch reply {
            case .callback(let callback):
                callback(.success(receipt))
            case .binary(let connection, let requestID, let tellsStatus):
                work[connection.loopIndex, default: LoopWork()].reply(
                    BinaryFrame.SendUserReply(requestID: requestID, msgId: UInt64(receipt.id),
                                              receiverOnline: tellsStatus ? receipt.receiverOnline : nil),
                    on: connection)
            }
        }
        for (receiver, message) in deliveries {
            work[receiver.connection.loopIndex, default: LoopWork()].deliver(message, to: receiver)
            noteSent(CollectionOfOne(message), to: receiver.connection)
        }
        if !deliveries.isEmpty { metrics?.userMessagesOut(deliveries.count) }
        let epoch = store.epoch
        for (_, loopWork) in work {
            guard let loop = loopWork.eventLoop else { continue }
            loop.execute { loopWork.run(epoch: epoch) }
        }
    }

    /// Delivers `messages` (in store order) to a receiver (waiting messages after a login).
    func deliver(_ messages: [StoredUserMessage], to receiver: Receiver) {
        guard !messages.isEmpty else { return }
        noteSent(messages, to: receiver.connection)
        metrics?.userMessagesOut(messages.count)
        var work = LoopWork()
        for message in messages { work.deliver(message, to: receiver) }
        let epoch = store.epoch
        let ready = work
        receiver.connection.channel.eventLoop.execute { ready.run(epoch: epoch) }
    }

    /// What one commit sends through one event loop, per connection in first-seen order.
    private struct LoopWork: Sendable {
        private var replies: [UInt64: (connection: ConnectionRef, replies: [BinaryFrame.SendUserReply])] = [:]
        private var deliveries: [UInt64: (receiver: Receiver, messages: [StoredUserMessage])] = [:]
        private var order: [UInt64] = []
        private(set) var eventLoop: (any EventLoop)?

        mutating func reply(_ reply: BinaryFrame.SendUserReply, on connection: ConnectionRef) {
            eventLoop = connection.channel.eventLoop
            if replies[connection.id] == nil {
                replies[connection.id] = (connection, [])
                if deliveries[connection.id] == nil { order.append(connection.id) }
            }
            replies[connection.id]!.replies.append(reply)
        }

        mutating func deliver(_ message: StoredUserMessage, to receiver: Receiver) {
            let id = receiver.connection.id
            eventLoop = receiver.connection.channel.eventLoop
            if deliveries[id] == nil {
                deliveries[id] = (receiver, [])
                if replies[id] == nil { order.append(id) }
            }
            deliveries[id]!.messages.append(message)
        }

        /// On the loop: encodes and writes everything, one flush per connection (the
        /// connection's outbox counts the bytes).
        func run(epoch: String) {
            for id in order {
                var channel: (any Channel)?
                if let (connection, list) = replies[id] {
                    channel = connection.channel
                    Self.writeReplies(list, on: connection)
                }
                if let (receiver, messages) = deliveries[id] {
                    channel = receiver.connection.channel
                    if receiver.binary {
                        Self.writeBinary(messages, epoch: epoch, on: receiver.connection)
                    } else {
                        // One text frame per message (JSON), written whole like the binary ones:
                        // one flush for all of them, not one each.
                        for message in messages {
                            let json = FrameCodec.encode(UserMailbox.jsonFrame(message, epoch: message.epoch ?? epoch),
                                                         allocator: receiver.connection.channel.allocator)
                            let frame = EncodedFrame.text(json, allocator: receiver.connection.channel.allocator)
                            receiver.connection.writeEncoded(frame.buffer, fallback: frame.webSocketFrame)
                        }
                    }
                }
                channel?.flush()
            }
        }

        /// `0x83` frames (a u16 count each: a larger list takes several), each encoded with its
        /// WebSocket header in one buffer and written below the frame encoder.
        private static func writeReplies(_ replies: [BinaryFrame.SendUserReply], on connection: ConnectionRef) {
            var start = 0
            while start < replies.count {
                let chunk = replies[start..<min(start + Int(UInt16.max), replies.count)]
                let frame = EncodedFrame.binary(allocator: connection.channel.allocator, capacity: 3 + 17 * chunk.count) {
                    BinaryFrame.writeSendUserReplies(into: &$0, chunk)
                }
                connection.writeEncoded(frame.buffer, fallback: frame.webSocketFrame)
                start += chunk.count
            }
        }

        /// `0x84` frames of at most about 60 KB each, one per run of messages of one mailbox
        /// epoch, encoded as `writeReplies` does.
        private static func writeBinary(_ messages: [StoredUserMessage], epoch store: String, on connection: ConnectionRef) {
            var frame: [BinaryFrame.UserMessage] = []
            var size = 0
            var epoch = messages.first?.epoch ?? store
            func write() {
                guard !frame.isEmpty else { return }
                let encoded = EncodedFrame.binary(allocator: connection.channel.allocator, capacity: size + 3 + epoch.utf8.count) {
                    BinaryFrame.writeUserMessages(into: &$0, epoch: epoch, frame)
                }
                connection.writeEncoded(encoded.buffer, fallback: encoded.webSocketFrame)
                frame.removeAll(keepingCapacity: true)
                size = 0
            }
            for message in messages {
                let item = UserMailbox.binaryItem(message)
                let itemSize = 24 + item.publisher.utf8.count + (item.customType?.utf8.count ?? 0) + item.payload.readableBytes
                if size + itemSize > 60_000 || (message.epoch ?? store) != epoch { write() }
                epoch = message.epoch ?? store
                frame.append(item)
                size += itemSize
            }
            write()
        }
    }

    fileprivate static func binaryItem(_ message: StoredUserMessage) -> BinaryFrame.UserMessage {
        let payload = message.text.map { ByteBuffer(string: $0) } ?? ByteBuffer(bytes: message.data ?? Data())
        return BinaryFrame.UserMessage(msgId: UInt64(message.id), ts: message.ts, publisher: message.sender,
                                       customType: message.customType, isText: message.text != nil, payload: payload)
    }

    fileprivate static func jsonFrame(_ message: StoredUserMessage, epoch: String) -> Frame {
        Frame(type: .message, channel: message.receiver, channelType: "user", publisher: message.sender,
              text: message.text, data: message.data, customType: message.customType, ts: message.ts,
              msgId: UInt64(message.id), epoch: epoch)
    }

    static var wallMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}

/// Why a user message was refused, in the words its sender gets (`UserMailbox.refuse`).
struct UserMessageRefused: Error, CustomStringConvertible {
    let description: String
}
