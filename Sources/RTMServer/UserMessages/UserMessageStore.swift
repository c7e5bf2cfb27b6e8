import Foundation
import NIOCore

/// A user (peer-to-peer) message waiting for its receiver's acknowledgement (SPEC M-1).
public struct StoredUserMessage: Sendable, Equatable {
    /// Store-assigned id: increases per store, never reused.
    public var id: Int64
    /// Application.
    public var appId: String
    /// Receiver's user id.
    public var receiver: String
    /// Sender's user id.
    public var sender: String
    /// Text payload.
    public var text: String?
    /// Binary payload.
    public var data: Data?
    /// Application-defined type.
    public var customType: String?
    /// Server time when it was accepted, ms since the Unix epoch.
    public var ts: Int64
    /// The sender's message id (SPEC M-3, PROTOCOL §3.2), when it gave one: a later message of
    /// the same sender with the same id is a resend of this one. Not part of what is delivered.
    public var clientMsgId: UInt64?
    /// The mailbox epoch it was stored under, when not the store's `epoch`: a cluster's store
    /// starts a new one when its database fails over to a standby (messages stored just before
    /// may be lost; the ids after it are above every earlier one).
    public var epoch: String?

    /// Creates a message; `id` is assigned by the store (pass 0).
    public init(id: Int64 = 0, appId: String, receiver: String, sender: String, text: String?, data: Data?, customType: String?, ts: Int64,
                clientMsgId: UInt64? = nil, epoch: String? = nil) {
        self.id = id; self.appId = appId; self.receiver = receiver; self.sender = sender
        self.text = text; self.data = data; self.customType = customType; self.ts = ts
        self.clientMsgId = clientMsgId
        self.epoch = epoch
    }
}

/// What a commit did with one message.
public struct CommittedUserMessage: Sendable, Equatable {
    /// The message's id; for a resend, the id its first attempt got.
    public let id: Int64
    /// The message was a resend of one already stored (same sender and `clientMsgId`): it was
    /// not stored again and must not be delivered again (SPEC M-3).
    public let isResend: Bool
    /// The mailbox epoch it was stored under, when not the store's (`StoredUserMessage.epoch`).
    public let epoch: String?
    /// The id of the receiver's message just before this one, when other writers may commit
    /// between two commits of this node (a store several nodes share: ids dense per receiver,
    /// so `id - 1`): the mailbox delivers it at once only to a connection that has that one, and
    /// reads the receiver's messages again otherwise. nil: this node's commits are the store's
    /// only ones (the embedded store), so nothing can come between.
    public let previous: Int64?

    /// Creates a result.
    public init(id: Int64, isResend: Bool = false, epoch: String? = nil, previous: Int64? = nil) {
        self.id = id
        self.isResend = isResend
        self.epoch = epoch
        self.previous = previous
    }
}

/// When a store drops its records of used client message ids that are older than the resend
/// window (`commit`'s `resendsSince`): at most twice per window, so the delete is rare and the
/// records live between one and one and a half windows.
public struct ResendRecordPruning: Sendable {
    /// When they were last dropped (ms; 0: not yet).
    private var last: Int64 = 0

    public init() {}

    /// Whether to drop them now; if so, counts this as done.
    public mutating func isDue(resendsSince: Int64) -> Bool {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        guard now - last > max(1, (now - resendsSince) / 2) else { return false }
        last = now
        return true
    }
}

/// Durable storage of user messages, behind which the embedded SQLite store (the default) and a
/// PostgreSQL store for several nodes sit: one seam, one path through the mailbox. The calls
/// below block; the mailbox makes them only on the store's own thread (`thread`, one call at a
/// time, in the order asked: `UserMessageStore+Calls`), so an implementation need not be
/// reentrant.
///
/// A store several nodes share also tells the mailbox what the other nodes commit (`follow`,
/// `newest`, `CommittedUserMessage.previous`); the embedded store has no other writer and
/// keeps the defaults (nothing to follow).
public protocol UserMessageStore: Sendable {
    /// An id for this store's contents, fixed when the store is created: message ids are only
    /// comparable under the same epoch.
    var epoch: String { get }

    /// The thread every call of the mailbox runs on (commits, reads, queries).
    var thread: StoreThread { get }

    /// Appends messages and applies acknowledgements in **one** durable transaction (group
    /// commit). Keeps at most `cap` messages per receiver, dropping the oldest and counting them
    /// (see `takeDropped`). Returns what happened to each of `messages`, in order.
    ///
    /// Resends (SPEC M-3): a message with a `clientMsgId` that its sender already used for a
    /// message stored at or after `resendsSince` (ms) is not stored again; its result carries
    /// the first one's id. The record of which ids were used is part of the same transaction,
    /// so it survives whatever the messages survive (a `kill -9`, the death of a node), and a
    /// store shared by several nodes settles two attempts committed at once. Records older
    /// than `resendsSince` may be forgotten.
    func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                resendsSince: Int64) throws -> [CommittedUserMessage]

    /// `commit`, given up on (an error) at `due` when the store is not done by then; whether the
    /// transaction then commits is unknown (a resend is recognised, M-3). The embedded store
    /// does not wait on anything but its disk and ignores `due`.
    func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                resendsSince: Int64, before due: NIODeadline) throws -> [CommittedUserMessage]

    /// What a sender is told when `commit` threw `error`: whether anything may be stored, in
    /// words a client may read. The default says nothing was (a local store rolls back).
    func refusalReason(for error: any Error) -> String

    /// The messages waiting for a receiver, oldest first. Messages older than `notBefore` (ms)
    /// are deleted and counted as dropped instead.
    func pending(appId: String, receiver: String, notBefore: Int64) throws -> [StoredUserMessage]

    /// How many messages were dropped for a receiver since the last call; resets the count.
    func takeDropped(appId: String, receiver: String) throws -> Int

    /// Calls `changed` (one call at a time) when other nodes committed messages: with their
    /// receivers, or nil when any receiver may have some (a poll, a reconnection). The default
    /// (one node, the only writer) never calls it.
    func follow(_ changed: @escaping @Sendable ([UserMessageReceiver]?) -> Void)

    /// The highest id ever given to each of `receivers` (absent: none yet). Asked only after
    /// `follow` reported something; the default answers nothing.
    func newest(_ receivers: [UserMessageReceiver]) throws -> [UserMessageReceiver: Int64]

    /// Stops following and closes the store's connections (after the mailbox drained).
    func stop() async
}

extension UserMessageStore {
    public func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int,
                       resendsSince: Int64, before due: NIODeadline) throws -> [CommittedUserMessage] {
        try commit(messages, acknowledgements: acknowledgements, cap: cap, resendsSince: resendsSince)
    }

    public func refusalReason(for error: any Error) -> String {
        "the message could not be stored: \(error)"
    }

    /// One node: nothing to follow.
    public func follow(_ changed: @escaping @Sendable ([UserMessageReceiver]?) -> Void) {}

    /// One node: never asked (`follow` reports nothing).
    public func newest(_ receivers: [UserMessageReceiver]) throws -> [UserMessageReceiver: Int64] { [:] }

    /// One node: nothing to stop.
    public func stop() async {}
}

/// A receiver of user messages, as a shared store names it.
public struct UserMessageReceiver: Hashable, Sendable {
    public let appId: String
    public let userId: String

    public init(appId: String, userId: String) {
        self.appId = appId
        self.userId = userId
    }
}
