import NIOCore

/// The rules of user (peer-to-peer) message delivery as a value (SPEC M-1, M-3): the online
/// receivers, the messages waiting for the next commit, the one commit in flight, the
/// acknowledgements to apply, the resend memory and the wake-up asked for. Every event is a
/// `mutating func` that takes the time (`now`) and returns `Actions`; the value touches no store,
/// socket, lock or clock. `UserMailbox` owns it behind one lock and performs the actions.
///
/// | state of the commit | what arrives meanwhile | at its `due` |
/// |---|---|---|
/// | none | a message or an ack starts one (after `commitDelay`, if set) | — |
/// | queued (handed to the store's thread) | waits for the next one (group commit) | refused, nothing stored; it never begins (`abandoned`) |
/// | running | waits for the next one | refused, outcome unknown (M-3: a resend is recognised) (`answered`) |
/// | answered / abandoned | waits | — |
///
/// When a commit ends, everything gathered meanwhile goes into the next one at once: one message
/// per commit when idle, thousands when busy. A message still waiting at its own `due` (behind
/// a slow commit) is refused unsent.
struct UserMailboxState {
    /// The fixed settings.
    struct Configuration {
        /// How many of a sender's message ids are remembered in memory (M-3; the store
        /// remembers them for longer).
        var dedupCapacity: Int
        /// How long a message that finds the store idle waits for company.
        var commitDelay: TimeAmount
        /// How long a submitted message may wait for its answer (`userMessageDeadline`).
        var deadline: TimeAmount
        /// The store's mailbox epoch (messages without one of their own are under it).
        var storeEpoch: String
    }

    /// A receiver online on this node.
    struct Receiver {
        let connection: ConnectionRef
        /// Deliveries take the binary form (`0x84`), else JSON.
        let binary: Bool
        /// Logging in: its waiting messages are being read; live commits wait here, to follow
        /// them in store order.
        var held: [Live]?
        /// The highest id written to this connection: an `ackUser` on it counts up to here, and
        /// a live message whose `previous` is this one follows it at once.
        var delivered: Int64 = 0
        /// The mailbox epoch of `delivered` (ids are comparable within one epoch).
        var deliveredEpoch: String?
        /// Its waiting messages are being read again; `rereadAgain`: once more after that.
        var rereading = false
        var rereadAgain = false

        mutating func markDelivered(_ message: StoredUserMessage, storeEpoch: String) {
            delivered = message.id
            deliveredEpoch = message.epoch ?? storeEpoch
        }
    }

    /// A message just committed, with the id before it in its receiver's order when the store
    /// knows one (`CommittedUserMessage.previous`).
    struct Live {
        let message: StoredUserMessage
        let previous: Int64?
    }

    /// A message waiting for a commit.
    /// (Its message waits beside it, in `pendingMessages`: a commit takes that list whole.)
    struct Pending {
        let reply: UserMailbox.ReplyTo
        let sender: UserKey
        /// When it must be answered.
        let due: NIODeadline
    }

    /// A commit the store made, to be answered and delivered (`settle`).
    struct Settling {
        let batch: [Pending]
        let messages: [StoredUserMessage]
        let results: [CommittedUserMessage]
        /// Its senders were answered already (its deadline passed while it ran).
        let answered: Bool
    }

    /// The commit handed to the store.
    struct Commit {
        enum Phase {
            case queued, running, answered, abandoned
        }

        let id: UInt64
        /// Its messages (emptied when abandoned: they will never be stored).
        var batch: [Pending]
        /// The messages of `batch`, in its order.
        var messages: [StoredUserMessage]
        let acks: [UserKey: Int64]
        let due: NIODeadline
        var phase: Phase
    }

    let configuration: Configuration
    /// The receivers with a connection here.
    var online: [UserKey: Receiver] = [:]
    private var pending: [Pending] = []
    /// The messages of `pending`, in its order.
    private var pendingMessages: [StoredUserMessage] = []
    private var acks: [UserKey: Int64] = [:]
    private var commit: Commit?
    /// Commits the store has made whose answers and deliveries are still to be worked out
    /// (`settle`), oldest first.
    private var settling: [Settling] = []
    private var lastCommitID: UInt64 = 0
    /// When a delayed commit starts (`commitDelay`).
    private var flushAt: NIODeadline?
    /// The earliest wake-up asked for and not yet come.
    private var wakeAt: NIODeadline?
    /// Senders' recent message ids and the ids they got (M-3), for senders with a connection.
    var recent: [UserKey: RecentIDs<Int64>] = [:]
    /// Messages stored since start (the admin API's counter).
    private(set) var storedCount: UInt64 = 0

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The highest id `key` acknowledged whose deletion is not committed yet (waiting for the
    /// next commit, or in the one not ended), or 0.
    func acknowledgedUncommitted(_ key: UserKey) -> Int64 {
        max(acks[key] ?? 0, commit?.acks[key] ?? 0)
    }

    /// Nothing waits and no commit runs (`UserMailbox.drain`).
    var isIdle: Bool { commit == nil && pending.isEmpty && acks.isEmpty && settling.isEmpty }
    /// Messages waiting for the next commit (a metric).
    var waitingCount: Int { pending.count }
    /// Senders whose message ids are remembered (bounded by the senders with a connection).
    var rememberedSenders: Int { recent.count }

    // MARK: events

    /// Messages of one sender (what one read of its connection brought). A resend of a message
    /// remembered here is answered with the first one's id and not stored again (M-3); the
    /// others wait for a commit.
    mutating func send(_ batch: [UserMailbox.Submission], from sender: UserKey, now: NIODeadline) -> Actions {
        var actions = Actions()
        let due = now + configuration.deadline
        // The sender's memory is looked up once for the batch (this runs under the mailbox's
        // lock, on the connection's loop).
        let memory = recent.index(forKey: sender)
        pending.reserveCapacity(pending.count + batch.count)
        pendingMessages.reserveCapacity(pendingMessages.count + batch.count)
        for submission in batch {
            if let memory, let clientMsgId = submission.message.clientMsgId, let first = recent.values[memory][clientMsgId] {
                let receiver = submission.message.receiverKey
                actions.answers.append(Answer(reply: submission.reply, id: first, away: online[receiver] == nil ? receiver : nil))
            } else {
                pending.append(Pending(reply: submission.reply, sender: sender, due: due))
                pendingMessages.append(submission.message)
            }
        }
        startCommit(now: now, force: false, &actions)
        return actions
    }

    /// The receiver acknowledged every message up to `id` on `connection` (SPEC M-1): deleted
    /// by the next commit. Only what was written to that connection counts: an id above it
    /// counts as the highest one written, and a connection no longer (or not yet) attached
    /// acknowledges nothing (its messages come again on the one that is).
    mutating func acknowledge(_ key: UserKey, upTo id: Int64, on connection: ConnectionRef, now: NIODeadline) -> Actions {
        guard let receiver = online[key], receiver.connection === connection else { return Actions() }
        let upTo = min(id, receiver.delivered)
        guard upTo > 0 else { return Actions() }
        acks[key] = max(acks[key] ?? 0, upTo)
        var actions = Actions()
        startCommit(now: now, force: false, &actions)
        return actions
    }

    /// On the store's thread, just before the transaction `id` begins: whether it may (false:
    /// its deadline came first and its senders were told nothing is stored).
    mutating func commitBegins(_ id: UInt64) -> Bool {
        guard var commit, commit.id == id else { preconditionFailure("invalid state: a commit begins that is not in flight") }
        guard case .queued = commit.phase else { return false }   // abandoned
        commit.phase = .running
        self.commit = commit
        return true
    }

    /// The transaction `id` ended: what arrived meanwhile is committed next, at once; a
    /// committed one waits to be settled (`settle`, asked for by `Actions.settle`: its senders
    /// answered unless its deadline answered them, its messages delivered to their receivers
    /// online here), so that the store's thread goes on to the next commit without doing that
    /// work per message.
    mutating func commitEnded(_ id: UInt64, _ outcome: CommitOutcome, now: NIODeadline) -> Actions {
        guard let commit, commit.id == id else { preconditionFailure("invalid state: a commit ends that is not in flight") }
        self.commit = nil
        var actions = Actions()
        let answered = commit.phase == .answered
        switch outcome {
        case .notBegun:
            // Nothing of it is stored: its acknowledgements go into the next commit.
            for (key, upTo) in commit.acks { acks[key] = max(acks[key] ?? 0, upTo) }
        case .failed(let reason, let timedOut):
            // The store says whether the commit may still have happened (M-3: the sender then
            // resends with the same msgId). Its acknowledgements come again with the next ack.
            if !answered { refuse(commit.batch, reason: timedOut ? unansweredInTime : reason, &actions) }
        case .committed(let results):
            settling.append(Settling(batch: commit.batch, messages: commit.messages, results: results, answered: answered))
            actions.settle = true
        }
        startCommit(now: now, force: true, &actions)   // what arrived meanwhile
        askWake(nextWake, &actions)
        return actions
    }

    /// The commits that ended since the last call, oldest first: their senders are answered and
    /// their messages delivered (in store order per receiver, SPEC M-1).
    mutating func settle() -> Actions {
        var actions = Actions()
        for made in settling { committed(made.batch, made.messages, made.results, answered: made.answered, &actions) }
        settling = []
        return actions
    }

    /// A wake-up asked for came: a delayed commit starts, a commit past its deadline is
    /// answered, messages past theirs behind a commit are refused.
    mutating func wake(now: NIODeadline) -> Actions {
        if let wakeAt, wakeAt <= now { self.wakeAt = nil }
        var actions = Actions()
        if let commit, commit.due <= now, !commit.batch.isEmpty { deadlinePassed(&actions) }
        startCommit(now: now, force: false, &actions)
        askWake(nextWake, &actions)
        return actions
    }

    /// Commits whatever waits now, without the commit delay (`UserMailbox.drain`).
    mutating func flush(now: NIODeadline) -> Actions {
        var actions = Actions()
        startCommit(now: now, force: true, &actions)
        return actions
    }

    // MARK: internals

    /// Hands everything gathered to the store as one transaction, unless one is in flight (it
    /// starts the next when it ends) or the commit delay has not passed (unless `force`).
    private mutating func startCommit(now: NIODeadline, force: Bool, _ actions: inout Actions) {
        guard commit == nil else {
            // Behind a commit that may take long: each message is refused unsent at its own due.
            expireLate(now: now, &actions)
            if let first = pending.first { askWake(first.due, &actions) }
            return
        }
        guard !pending.isEmpty || !acks.isEmpty else {
            flushAt = nil
            return
        }
        if !force, configuration.commitDelay > .zero {
            // Group commit at a light load: one commit for what arrives within the delay.
            let at = flushAt ?? now + configuration.commitDelay
            flushAt = at
            if now < at {
                askWake(at, &actions)
                return
            }
        }
        flushAt = nil
        expireLate(now: now, &actions)
        guard !pending.isEmpty || !acks.isEmpty else { return }
        let batch = pending, messages = pendingMessages
        pending = []
        pendingMessages = []
        let acknowledgements = acks
        acks = [:]
        lastCommitID &+= 1
        // The commit may take only what its oldest message has left (they wait in arrival order).
        let due = batch.first?.due ?? now + configuration.deadline
        commit = Commit(id: lastCommitID, batch: batch, messages: messages, acks: acknowledgements, due: due, phase: .queued)
        actions.commit = CommitRequest(id: lastCommitID, messages: messages,
                                       acknowledgements: acknowledgements.map { (appId: $0.key.appId, receiver: $0.key.userId, upTo: $0.value) },
                                       due: due)
        // Its senders are answered by `due` whatever the store is doing.
        if !batch.isEmpty { askWake(due, &actions) }
    }

    /// The deadline of the commit in flight passed: its senders are refused, with nothing stored
    /// if it has not begun (it never will), or with the outcome unknown if it runs (SPEC M-3: a
    /// resend with the same msgId is recognised whatever the commit does).
    private mutating func deadlinePassed(_ actions: inout Actions) {
        guard var commit else { return }
        switch commit.phase {
        case .queued:
            commit.phase = .abandoned
            refuse(commit.batch, reason: notTakenInTime, &actions)
            commit.batch = []
            commit.messages = []
        case .running:
            commit.phase = .answered
            refuse(commit.batch, reason: unansweredInTime, &actions)
        case .answered, .abandoned:
            return
        }
        self.commit = commit
    }

    /// Refuses, unsent, the waiting messages whose time ran out behind earlier commits. Messages
    /// wait in arrival order, so the late ones are first.
    private mutating func expireLate(now: NIODeadline, _ actions: inout Actions) {
        guard let first = pending.first, first.due <= now else { return }
        let count = pending.prefix { $0.due <= now }.count
        refuse(pending[..<count], reason: notTakenInTime, &actions)
        pending.removeFirst(count)
        pendingMessages.removeFirst(count)
    }

    /// The next wake-up needed: the delayed commit's start, the commit's deadline, the oldest
    /// waiting message's.
    private var nextWake: NIODeadline? {
        guard let commit else { return flushAt }
        let commitDue = commit.batch.isEmpty || commit.phase == .answered ? nil : commit.due
        return [commitDue, pending.first?.due].compactMap { $0 }.min()
    }

    /// Asks for a wake-up at `at` unless one at or before it is coming.
    private mutating func askWake(_ at: NIODeadline?, _ actions: inout Actions) {
        guard let at else { return }
        if let wakeAt, wakeAt <= at { return }
        wakeAt = at
        actions.wake = min(actions.wake ?? at, at)
    }

    /// A transaction's results: answers, the resend memory, deliveries.
    private mutating func committed(_ batch: [Pending], _ messages: [StoredUserMessage], _ results: [CommittedUserMessage], answered: Bool,
                                    _ actions: inout Actions) {
        storedCount &+= UInt64(results.lazy.filter { !$0.isResend }.count)
        if !answered { actions.answers.reserveCapacity(actions.answers.count + batch.count) }
        actions.deliveries.reserveCapacity(batch.count)
        // A sender's messages come in runs (one read of its connection), usually to one
        // receiver: its resend memory is looked up once per run, and so is the receiver.
        var run: (sender: UserKey, ids: [(UInt64, Int64)])?
        var last: (receiver: UserKey, index: Dictionary<UserKey, Receiver>.Index?)?
        for (index, (item, result)) in zip(batch, results).enumerated() {
            var message = messages[index]
            message.id = result.id
            message.epoch = result.epoch
            if let clientMsgId = message.clientMsgId {
                if run?.sender != item.sender {
                    if let run { remember(run.ids, of: run.sender) }
                    run = (item.sender, [])
                }
                run!.ids.append((clientMsgId, result.id))
            }
            // One look-up for the answer and the delivery, and for the next messages to the same
            // receiver (`online` keeps its layout: a delivery changes a receiver's value only).
            let receiver: Dictionary<UserKey, Receiver>.Index?
            if let last, last.receiver.userId == message.receiver, last.receiver.appId == message.appId {
                receiver = last.index
            } else {
                let key = message.receiverKey
                receiver = online.index(forKey: key)
                last = (key, receiver)
            }
            let key = last!.receiver
            if !answered {
                actions.answers.append(Answer(reply: item.reply, id: result.id, away: receiver == nil ? key : nil))
            }
            // A resend the store recognised (after a restart, through another node, or twice in
            // one batch): its first copy is delivered (or waits in the store), never this one.
            if !result.isResend, let receiver { deliverLive(Live(message: message, previous: result.previous), to: receiver, &actions) }
        }
        if let run { remember(run.ids, of: run.sender) }
    }

    /// Remembers a sender's message ids and the ids they got, when it has a connection here (the
    /// store answers the others' resends, M-3).
    private mutating func remember(_ ids: [(UInt64, Int64)], of sender: UserKey) {
        guard online[sender] != nil else { return }
        if recent[sender] == nil { recent[sender] = RecentIDs(capacity: configuration.dedupCapacity) }
        let index = recent.index(forKey: sender)!
        for (clientMsgId, id) in ids { recent.values[index].remember(clientMsgId, id) }
    }

    /// A committed message for the receiver at `index` of `online`: to its connection at once
    /// if it follows what that has; held behind a login's read; a gap (another node's message)
    /// is read from the store.
    private mutating func deliverLive(_ live: Live, to index: Dictionary<UserKey, Receiver>.Index, _ actions: inout Actions) {
        if online.values[index].held != nil {
            online.values[index].held!.append(live)
        } else if let previous = live.previous, previous != online.values[index].delivered {
            reread(online.keys[index], &actions)
        } else {
            online.values[index].markDelivered(live.message, storeEpoch: configuration.storeEpoch)
            let receiver = online.values[index]
            actions.deliveries.append(Delivery(connection: receiver.connection, binary: receiver.binary, message: live.message))
        }
    }

    private func refuse(_ batch: some Collection<Pending>, reason: String, _ actions: inout Actions) {
        actions.refusals.append(contentsOf: batch.map { Refusal(reply: $0.reply, reason: reason) })
    }

    /// The refusal of a message whose commit had not begun by its deadline (it never will).
    var notTakenInTime: String {
        "the message store did not take the message within \(Self.seconds(configuration.deadline)) s: nothing was stored; retry"
    }

    /// The refusal of a message whose commit ran past its deadline (M-3: a resend is recognised).
    var unansweredInTime: String {
        "the message store did not answer within \(Self.seconds(configuration.deadline)) s: the outcome is unknown; resend with the same msgId"
    }

    private static func seconds(_ amount: TimeAmount) -> String {
        let value = Double(amount.nanoseconds) / 1e9
        return value == value.rounded() ? String(Int(value)) : String(value)
    }
}

extension StoredUserMessage {
    /// Its receiver's key.
    var receiverKey: UserKey { UserKey(appId: appId, userId: receiver) }
}
