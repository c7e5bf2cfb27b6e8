import Foundation
import Logging
import NIOCore
import NIOWebSocket
import RTMProtocol

/// The one owner of user (peer-to-peer) message delivery (SPEC M-1): it stores each message
/// durably before the sender's acknowledgement, delivers it to the receiver's connection in
/// order, re-delivers everything unacknowledged when the receiver logs in again, and forgets a
/// message only when the receiver's SDK acknowledges it.
///
/// Every operation runs on one serial queue, so the store, the table of online receivers and
/// the order of deliveries have a single owner. Writes that arrive while a commit is running
/// are committed together in the next transaction (group commit).
final class UserMailbox: @unchecked Sendable {
    /// What the sender is told.
    struct Receipt: Sendable {
        /// The store's id of the message.
        let id: Int64
        /// Whether the receiver had a connection when the message was committed.
        let receiverOnline: Bool
    }

    typealias Reply = @Sendable (Result<Receipt, any Error>) -> Void

    private struct Pending {
        let message: StoredUserMessage
        let sender: UserKey
        let clientMsgId: UInt64?
        let reply: Reply
    }

    private let queue = DispatchQueue(label: "rtm.mailbox")
    private let store: any UserMessageStore
    private let cap: Int
    private let maxAgeMillis: Int64
    private let logger: Logger
    private let dedupCapacity: Int

    // Confined to `queue`.
    private var online: [UserKey: ConnectionRef] = [:]
    private var pending: [Pending] = []
    private var acks: [UserKey: Int64] = [:]
    private var flushScheduled = false
    private var recent: [UserKey: RecentIDs<Receipt>] = [:]

    init(store: any UserMessageStore, cap: Int, maxAge: TimeAmount, dedupCapacity: Int, logger: Logger) {
        self.store = store
        self.cap = cap
        self.maxAgeMillis = maxAge.nanoseconds / 1_000_000
        self.dedupCapacity = dedupCapacity
        self.logger = logger
    }

    /// Stores `message` durably, then replies (after the commit) and delivers it if the receiver
    /// is online. A resend with the same `clientMsgId` from the same sender is answered with the
    /// first receipt and not stored again (M-3).
    func send(_ message: StoredUserMessage, from sender: UserKey, clientMsgId: UInt64?, reply: @escaping Reply) {
        queue.async { [self] in
            if let id = clientMsgId, let receipt = recent[sender]?[id] {
                reply(.success(receipt))
                return
            }
            pending.append(Pending(message: message, sender: sender, clientMsgId: clientMsgId, reply: reply))
            scheduleFlush()
        }
    }

    /// The receiver acknowledged every message up to `id`: they are deleted (batched).
    func acknowledge(_ key: UserKey, upTo id: Int64) {
        queue.async { [self] in
            acks[key] = max(acks[key] ?? 0, id)
            scheduleFlush()
        }
    }

    /// A connection of `key` logged in: send it every waiting message (and how many were
    /// dropped), then deliver new ones to it as they are committed.
    func attach(_ key: UserKey, connection: ConnectionRef) {
        queue.async { [self] in
            online[key] = connection
            do {
                let dropped = try store.takeDropped(appId: key.appId, receiver: key.userId)
                let notBefore = Self.wallMillis - maxAgeMillis
                let waiting = try store.pending(appId: key.appId, receiver: key.userId, notBefore: notBefore)
                let droppedNow = try store.takeDropped(appId: key.appId, receiver: key.userId)
                if dropped + droppedNow > 0 {
                    Hub.send(Frame(type: .dropped, channelType: "user", ts: Self.wallMillis, epoch: store.epoch, count: dropped + droppedNow), on: connection.channel)
                }
                for message in waiting { deliver(message, to: connection) }
            } catch {
                logger.error("reading waiting user messages failed", metadata: ["user": "\(key.userId)", "error": "\(error)"])
            }
        }
    }

    /// That connection is gone: messages wait in the store until the next `attach`.
    func detach(_ key: UserKey, connection: ConnectionRef) {
        queue.async { [self] in
            if online[key] === connection { online[key] = nil }
        }
    }

    /// Waits until everything submitted so far has been committed (tests, shutdown).
    func drain() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                flush()
                continuation.resume()
            }
        }
    }

    // MARK: internals (on `queue`)

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        // Queued behind whatever is already waiting on the queue, so those join this commit.
        queue.async { [self] in flush() }
    }

    private func flush() {
        flushScheduled = false
        guard !pending.isEmpty || !acks.isEmpty else { return }
        let batch = pending
        let acknowledgements = acks.map { (appId: $0.key.appId, receiver: $0.key.userId, upTo: $0.value) }
        pending = []
        acks = [:]
        let ids: [Int64]
        do {
            ids = try store.commit(batch.map(\.message), acknowledgements: acknowledgements, cap: cap)
        } catch {
            logger.error("storing user messages failed", metadata: ["count": "\(batch.count)", "error": "\(error)"])
            for item in batch { item.reply(.failure(error)) }
            return
        }
        for (item, id) in zip(batch, ids) {
            var message = item.message
            message.id = id
            let receiver = online[UserKey(appId: message.appId, userId: message.receiver)]
            let receipt = Receipt(id: id, receiverOnline: receiver != nil)
            if let clientMsgId = item.clientMsgId {
                recent[item.sender, default: RecentIDs(capacity: dedupCapacity)].remember(clientMsgId, receipt)
            }
            item.reply(.success(receipt))
            if let receiver { deliver(message, to: receiver) }
        }
    }

    private func deliver(_ message: StoredUserMessage, to connection: ConnectionRef) {
        Hub.send(Frame(type: .message, channel: message.receiver, channelType: "user", publisher: message.sender,
                       text: message.text, data: message.data, customType: message.customType, ts: message.ts,
                       msgId: UInt64(message.id), epoch: store.epoch), on: connection.channel)
    }


    static var wallMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
