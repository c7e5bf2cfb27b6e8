import Foundation
import Logging
import RTMProtocol

/// The one owner of metadata sets and message history (AGORA_REFERENCE §2.8, §2.11).
///
/// Every operation runs on one serial queue. A write's read, revision check and write run in
/// one store transaction (`SharedServiceStore.modifyMetadata`), which excludes every other
/// writer of the set (other nodes' too, in a cluster), so two writers with the same revision
/// cannot both win; then it is announced. One node and a cluster take the same path: a single
/// node's store is `LocalServiceStore`.
final class StorageService: @unchecked Sendable {
    /// A failed operation: the error code and a reason naming the problem.
    typealias Failure = RequestRefusal

    /// Called on the queue after each successful write, in write order.
    typealias ChangeHandler = @Sendable (StorageKey, StorageEventKind, Metadata, _ notifyAll: Bool) -> Void

    private let queue = CountedQueue(label: "rtm.storage")
    private let store: any SharedServiceStore
    private let limits: Limits
    private let logger: Logger
    private var onChange: ChangeHandler = { _, _, _, _ in }
    private var isInterested: @Sendable (StorageKey) -> Bool = { _ in true }

    // Confined to `queue`.
    /// The newest revision of each set this node's subscribers were told of.
    private var announced: [StorageKey: Int64] = [:]
    private static let maxAnnounced = 100_000

    /// Operations waiting on the queue or running (`rtm_queue_depth{queue="storage"}`).
    var queueDepth: Int { queue.depth }

    /// Over `store`: a cluster's `PostgresServices`, or a single node's `LocalServiceStore`.
    init(store: any SharedServiceStore, limits: Limits, logger: Logger) {
        self.store = store
        self.limits = limits
        self.logger = logger
    }

    /// Sets who is told of changes (once, before any write), and, for other nodes' changes
    /// (cluster mode), whether anyone here wants to hear of a set: one nobody follows here is
    /// not read again.
    func setChangeHandler(_ handler: @escaping ChangeHandler, interested: @escaping @Sendable (StorageKey) -> Bool = { _ in true }) {
        queue.sync {
            onChange = handler
            isInterested = interested
        }
    }

    // MARK: metadata

    /// Applies a write. `requiredLock` (a write guarded by a channel lock, §2.11): the writer
    /// must hold the lock when the write is made, checked in the write's own transaction.
    func write(_ operation: MetadataDocument.Operation, key: StorageKey, request: Metadata,
               options: MetadataDocument.WriteOptions, author: String, notifyAll: Bool = false,
               requiredLock: MetadataLockGuard? = nil,
               reply: @escaping @Sendable (Result<Metadata, Failure>) -> Void) {
        queue.async { [self] in
            let limits = self.limits
            let apply: @Sendable (Metadata?) throws -> Metadata = { current in
                var document = current.map(MetadataDocument.init) ?? MetadataDocument()
                if let (code, reason) = document.apply(operation, request, options: options, author: author,
                                                       nowMillis: Hub.wallMillis, limits: limits) {
                    throw Failure(code: code, reason: reason)
                }
                return document.metadata
            }
            do {
                // §2.11: read, check and write in one transaction.
                let metadata = try store.modifyMetadata(key, requiredLock: requiredLock, apply)
                remember(key, metadata.majorRevision)
                store.announce(StorageChangeNotice(key: key, kind: StorageEventKind(operation),
                                                   majorRevision: metadata.majorRevision, notifyAll: notifyAll))
                reply(.success(metadata))
                onChange(key, StorageEventKind(operation), metadata, notifyAll)
            } catch let refusal as RequestRefusal {   // this node's check, or the shared store's
                reply(.failure(refusal))
            } catch {
                logger.error("metadata write failed", metadata: ["error": "\(String(reflecting: error))"])
                reply(.failure(Failure(code: .storageOperationFailed, reason: StoreFailureWords.reason("the store could not be written", error, write: true))))
            }
        }
    }

    /// Another node changed a set (cluster mode): it is read again and this node's subscribers
    /// get it, unless they already got this revision or a newer one.
    func remoteChanged(_ notice: StorageChangeNotice) {
        queue.async { [self] in
            guard notice.majorRevision > announced[notice.key] ?? -1, isInterested(notice.key) else { return }
            do {
                let metadata = try store.loadMetadata(notice.key) ?? Metadata()
                guard metadata.majorRevision > announced[notice.key] ?? -1 else { return }
                remember(notice.key, metadata.majorRevision)
                onChange(notice.key, notice.kind, metadata, notice.notifyAll)
            } catch {
                logger.warning("a set another node changed could not be read", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Notes that this node's subscribers were told of `key` at `revision` (on the queue).
    private func remember(_ key: StorageKey, _ revision: Int64) {
        if announced.count >= Self.maxAnnounced { announced = [:] }   // bounded; a reset only re-reads
        announced[key] = revision
    }

    /// Starts hearing of other nodes' metadata changes (a single node hears nothing).
    func followOtherNodes() {
        store.followStorage { [weak self] notice in self?.remoteChanged(notice) }
    }

    /// The current set (empty, revision 0, if none was ever written).
    func read(_ key: StorageKey, reply: @escaping @Sendable (Result<Metadata, Failure>) -> Void) {
        queue.async { [self] in
            do {
                reply(.success((try store.loadMetadata(key).map(MetadataDocument.init) ?? MetadataDocument()).metadata))
            } catch {
                logger.error("metadata read failed", metadata: ["error": "\(String(reflecting: error))"])
                reply(.failure(Failure(code: .storageOperationFailed, reason: StoreFailureWords.reason("the store could not be read", error, write: false))))
            }
        }
    }

    // MARK: history

    /// Stores a message in a channel's history. Its timestamp is the server time, moved forward
    /// by the store where needed so that it is unique within the channel (the paging cursor).
    /// Replies with it (a resend already stored: with the time given).
    func appendHistory(appId: String, channelType: String, channel: String, message: HistoryMessage, dedupKey: String?,
                       reply: @escaping @Sendable (Result<Int64, Failure>) -> Void) {
        queue.async { [self] in
            do {
                let record = HistoryRecord(appId: appId, channelType: channelType, channel: channel, message: message, dedupKey: dedupKey)
                reply(.success(try store.appendHistory(record) ?? message.ts))
            } catch {
                logger.error("history write failed", metadata: ["error": "\(String(reflecting: error))"])
                reply(.failure(Failure(code: .historyOperationFailed, reason: StoreFailureWords.reason("the history could not be written", error, write: true))))
            }
        }
    }

    /// Up to `count` messages with `end <= ts < start`, newest first, and the next cursor
    /// (the oldest returned timestamp; 0 when nothing older is left).
    func history(appId: String, channelType: String, channel: String, start: Int64, end: Int64, count: Int,
                 reply: @escaping @Sendable (Result<(messages: [HistoryMessage], newStart: Int64), Failure>) -> Void) {
        queue.async { [self] in
            do {
                // One more than asked tells whether anything older is left.
                var messages = try store.history(appId: appId, channelType: channelType, channel: channel,
                                                 start: start, end: end, limit: count + 1)
                var newStart: Int64 = 0
                if messages.count > count {
                    messages.removeLast()
                    newStart = messages.last?.ts ?? 0
                }
                reply(.success((messages, newStart)))
            } catch {
                logger.error("history read failed", metadata: ["error": "\(String(reflecting: error))"])
                reply(.failure(Failure(code: .historyOperationFailed, reason: StoreFailureWords.reason("the history could not be read", error, write: false))))
            }
        }
    }

    /// Forgets history older than the retention time.
    func trimHistory(olderThan millis: Int64) {
        queue.async { [self] in
            do {
                let removed = try store.trimHistory(olderThan: millis)
                if removed > 0 { logger.info("history trimmed", metadata: ["messages": "\(removed)"]) }
            } catch {
                logger.error("history trim failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Waits for every queued operation (shutdown, tests).
    func drain() async {
        await queue.drain()
    }
}

extension StorageEventKind {
    init(_ operation: MetadataDocument.Operation) {
        switch operation {
        case .set: self = .set
        case .update: self = .update
        case .remove: self = .remove
        case .replace: self = .set
        }
    }
}
