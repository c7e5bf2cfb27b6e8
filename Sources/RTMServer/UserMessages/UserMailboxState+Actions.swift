import NIOCore

extension UserMailboxState {
    /// What one event asks its owner (`UserMailbox.run`) to do, after the lock is released, in
    /// this order: refusals and answers, reports of dropped messages, deliveries (a report
    /// comes before the messages that follow it on the same connection), then the store calls,
    /// the settling and the wake-up.
    struct Actions {
        /// Senders refused, with the reason they are told.
        var refusals: [Refusal] = []
        /// Senders answered with their message's id.
        var answers: [Answer] = []
        /// Receivers told that messages were dropped undelivered (SPEC M-1: never silent).
        var dropped: [DroppedReport] = []
        /// Messages to write to receivers' connections, in store order per receiver.
        var deliveries: [Delivery] = []
        /// A transaction to hand to the store (one at a time).
        var commit: CommitRequest?
        /// Commits ended: the owner must call `settle()` (off the store's thread).
        var settle = false
        /// Receivers whose waiting messages the store must read.
        var reads: [Read] = []
        /// Receivers whose newest id the store must look up (another node may have committed).
        var newest: [UserKey] = []
        /// When the owner must call `wake(now:)`.
        var wake: NIODeadline?

        /// Adds what `other` asks after what this one asks (of two wake-ups, the earlier).
        mutating func append(_ other: Actions) {
            refusals += other.refusals
            answers += other.answers
            dropped += other.dropped
            deliveries += other.deliveries
            if let commit = other.commit { precondition(self.commit == nil, "invalid state: two commits"); self.commit = commit }
            settle = settle || other.settle
            reads += other.reads
            newest += other.newest
            if let wake = other.wake { self.wake = min(self.wake ?? wake, wake) }
        }

        /// Nothing to do.
        var isEmpty: Bool {
            refusals.isEmpty && answers.isEmpty && dropped.isEmpty && deliveries.isEmpty && commit == nil && !settle
                && reads.isEmpty && newest.isEmpty && wake == nil
        }
    }

    /// One transaction: the messages gathered since the last one and the acknowledgements.
    struct CommitRequest {
        /// Tells its end (`commitEnded`) and its start (`commitBegins`) from a stale one's.
        let id: UInt64
        let messages: [StoredUserMessage]
        let acknowledgements: [(appId: String, receiver: String, upTo: Int64)]
        /// What its oldest message has left (acknowledgements alone: a whole deadline).
        let due: NIODeadline
    }

    /// How a transaction ended.
    enum CommitOutcome {
        /// Committed: what happened to each message, in order.
        case committed([CommittedUserMessage])
        /// Failed: `reason` is what the senders are told; `timedOut`: the store ran out of the
        /// message's time (they are told the deadline's reason: the outcome is unknown).
        case failed(reason: String, timedOut: Bool)
        /// Never begun: its deadline came first (`commitBegins` said no).
        case notBegun
    }

    /// A sender's answer: the message's id. Whether its receiver is online on another node is
    /// asked by the owner, outside the lock, for those not online here.
    struct Answer {
        let reply: UserMailbox.ReplyTo
        let id: Int64
        /// The receiver, when it is not online here (nil: it is).
        let away: UserKey?

        /// The receiver is online here.
        var onlineHere: Bool { away == nil }
    }

    /// A sender's refusal.
    struct Refusal {
        let reply: UserMailbox.ReplyTo
        let reason: String
    }

    /// One message for one receiver's connection.
    struct Delivery {
        let connection: ConnectionRef
        let binary: Bool
        let message: StoredUserMessage
    }

    /// Messages of `key` dropped undelivered (the cap or the age, SPEC M-1): told to its
    /// connection (a `dropped` frame under `epoch`) and to the `userMessageUndeliverable` hook.
    struct DroppedReport {
        let key: UserKey
        let connection: ConnectionRef
        let epoch: String
        let count: Int
        /// Found by this node in a complete read while the receiver was online (ids skipped):
        /// the store's count of them must be taken too, so that the next login does not report
        /// them again. false: the store's count, taken by the read.
        let whileOnline: Bool
    }

    /// A read of a receiver's waiting messages for `connection`.
    struct Read {
        let key: UserKey
        let connection: ConnectionRef
        /// A login's read: also takes the store's count of dropped messages.
        let login: Bool
    }

    /// What a read found.
    struct WaitingRead {
        /// Messages dropped since the last login (counted by the store; a login's read only).
        var dropped: Int
        /// Every message still stored for the receiver, in id order.
        var messages: [StoredUserMessage]
    }
}
