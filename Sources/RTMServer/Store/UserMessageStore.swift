import Foundation

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

    /// Creates a message; `id` is assigned by the store (pass 0).
    public init(id: Int64 = 0, appId: String, receiver: String, sender: String, text: String?, data: Data?, customType: String?, ts: Int64) {
        self.id = id; self.appId = appId; self.receiver = receiver; self.sender = sender
        self.text = text; self.data = data; self.customType = customType; self.ts = ts
    }
}

/// Durable storage of user messages, behind which the embedded SQLite store (the default) and a
/// PostgreSQL store for several nodes can sit. Calls are synchronous and made by one owner
/// (`UserMailbox`) from its own queue; an implementation need not be reentrant.
public protocol UserMessageStore: Sendable {
    /// An id for this store's contents, fixed when the store is created: message ids are only
    /// comparable under the same epoch.
    var epoch: String { get }

    /// Appends messages and applies acknowledgements in **one** durable transaction (group
    /// commit). Keeps at most `cap` messages per receiver, dropping the oldest and counting them
    /// (see `takeDropped`). Returns the ids of `messages`, in order.
    func commit(_ messages: [StoredUserMessage], acknowledgements: [(appId: String, receiver: String, upTo: Int64)], cap: Int) throws -> [Int64]

    /// The messages waiting for a receiver, oldest first. Messages older than `notBefore` (ms)
    /// are deleted and counted as dropped instead.
    func pending(appId: String, receiver: String, notBefore: Int64) throws -> [StoredUserMessage]

    /// How many messages were dropped for a receiver since the last call; resets the count.
    func takeDropped(appId: String, receiver: String) throws -> Int
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

/// A store shared by several nodes (cluster mode, issue 13): messages committed by one node
/// must reach a receiver connected to another. Ids must be **dense and committed in order per
/// receiver** (the receiver's SDK drops an id at or below the last it saw), so that a read that
/// sees a receiver's id n sees every smaller id still stored.
public protocol SharedUserMessageStore: UserMessageStore {
    /// Calls `changed` (one call at a time) when other nodes committed messages: with their
    /// receivers, or nil when any receiver may have some (a poll, a reconnection).
    func follow(_ changed: @escaping @Sendable ([UserMessageReceiver]?) -> Void)
    /// The highest id ever given to each of `receivers` (absent: none yet).
    func newest(_ receivers: [UserMessageReceiver]) throws -> [UserMessageReceiver: Int64]
    /// Stops following and closes the store's connections.
    func stop() async
}
