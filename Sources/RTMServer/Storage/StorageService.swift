import Foundation
import Logging
import RTMProtocol

/// The one owner of metadata sets and message history (AGORA_REFERENCE §2.8, §2.11).
///
/// Every operation runs on one serial queue: a write reads the set, checks its revisions,
/// writes the new set through to the store and announces it, before the next write starts, so
/// two writers with the same revision cannot both win. Sets are cached after first use.
final class StorageService: @unchecked Sendable {
    /// A failed operation: the error code and a reason naming the problem.
    struct Failure: Error, Sendable {
        let code: RTMErrorCode
        let reason: String
    }

    /// Called on the queue after each successful write, in write order.
    typealias ChangeHandler = @Sendable (StorageKey, StorageEventKind, Metadata, _ notifyAll: Bool) -> Void

    private let queue = CountedQueue(label: "rtm.storage")
    private let store: any ServiceStore
    private let limits: Limits
    private let logger: Logger
    private var onChange: ChangeHandler = { _, _, _, _ in }

    // Confined to `queue`.
    private var documents: [StorageKey: MetadataDocument] = [:]
    private var lastHistoryTs: [String: Int64] = [:]

    /// Operations waiting on the queue or running (`rtm_queue_depth{queue="storage"}`).
    var queueDepth: Int { queue.depth }

    init(store: any ServiceStore, limits: Limits, logger: Logger) {
        self.store = store
        self.limits = limits
        self.logger = logger
    }

    /// Sets who is told of changes (once, before any write).
    func setChangeHandler(_ handler: @escaping ChangeHandler) {
        queue.sync { onChange = handler }
    }

    // MARK: metadata

    /// Applies a write. `precondition` runs on the queue just before the revisions are checked
    /// (the lock guard: the writer must hold the named lock at that moment).
    func write(_ operation: MetadataDocument.Operation, key: StorageKey, request: Metadata,
               options: MetadataDocument.WriteOptions, author: String, notifyAll: Bool = false,
               precondition: @escaping @Sendable () -> Failure?,
               reply: @escaping @Sendable (Result<Metadata, Failure>) -> Void) {
        queue.async { [self] in
            if let failure = precondition() { reply(.failure(failure)); return }
            do {
                var document = try load(key)
                if let (code, reason) = document.apply(operation, request, options: options, author: author,
                                                       nowMillis: Hub.wallMillis, limits: limits) {
                    reply(.failure(Failure(code: code, reason: reason)))
                    return
                }
                try store.saveMetadata(key, document.metadata)
                documents[key] = document
                let metadata = document.metadata
                reply(.success(metadata))
                onChange(key, StorageEventKind(operation), metadata, notifyAll)
            } catch {
                logger.error("metadata write failed", metadata: ["error": "\(error)"])
                documents[key] = nil   // reload from the store next time
                reply(.failure(Failure(code: .storageOperationFailed, reason: "the store could not be written: \(error)")))
            }
        }
    }

    /// The current set (empty, revision 0, if none was ever written).
    func read(_ key: StorageKey, reply: @escaping @Sendable (Result<Metadata, Failure>) -> Void) {
        queue.async { [self] in
            do {
                reply(.success(try load(key).metadata))
            } catch {
                reply(.failure(Failure(code: .storageOperationFailed, reason: "the store could not be read: \(error)")))
            }
        }
    }

    private func load(_ key: StorageKey) throws -> MetadataDocument {
        if let cached = documents[key] { return cached }
        let document = try store.loadMetadata(key).map(MetadataDocument.init) ?? MetadataDocument()
        documents[key] = document
        return document
    }

    // MARK: history

    /// Stores a message in a channel's history. Its timestamp is the server time, moved forward
    /// by a millisecond where needed so that it is unique within the channel: timestamps are
    /// the paging cursor, and a page boundary must never split equal ones. Replies with it.
    func appendHistory(appId: String, channelType: String, channel: String, message: HistoryMessage, dedupKey: String?,
                       reply: @escaping @Sendable (Result<Int64, Failure>) -> Void) {
        queue.async { [self] in
            do {
                let cursorKey = "\(appId)\n\(channelType)\n\(channel)"
                let last = try lastHistoryTs[cursorKey] ?? store.lastHistoryTs(appId: appId, channelType: channelType, channel: channel)
                var message = message
                message.ts = max(message.ts, last + 1)
                let record = HistoryRecord(appId: appId, channelType: channelType, channel: channel, message: message, dedupKey: dedupKey)
                if try store.appendHistory(record) { lastHistoryTs[cursorKey] = message.ts }
                reply(.success(message.ts))
            } catch {
                logger.error("history write failed", metadata: ["error": "\(error)"])
                reply(.failure(Failure(code: .historyOperationFailed, reason: "the history could not be written: \(error)")))
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
                reply(.failure(Failure(code: .historyOperationFailed, reason: "the history could not be read: \(error)")))
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
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
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
