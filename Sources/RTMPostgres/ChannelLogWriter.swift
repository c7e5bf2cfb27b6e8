import Logging
import PostgresNIO

/// A node's one writer to the channel log: group commit. Publishes that arrive while a
/// transaction runs wait and go into the next one together (one transaction and one wake-up
/// for many messages, sized by load), so the database sees few, large transactions.
public actor ChannelLogWriter {
    private struct Waiting {
        let items: [ChannelLogAppend]
        let continuation: CheckedContinuation<[ChannelLogReceipt], any Error>
    }

    private let log: PostgresChannelLog
    private let node: String
    private let maxBatch: Int
    private let logger: Logger
    private var waiting: [Waiting] = []
    private var running = false
    private var notifying = false
    private var notifyAgain = false
    /// Transactions committed so far.
    public private(set) var commits = 0
    /// Messages committed so far.
    public private(set) var committed = 0

    /// `maxBatch`: the most messages in one transaction (a larger wait is split).
    public init(log: PostgresChannelLog, node: String, maxBatch: Int = 5_000, logger: Logger) {
        self.log = log
        self.node = node
        self.maxBatch = max(1, maxBatch)
        self.logger = logger
    }

    /// Appends `items` (all committed in one transaction) and returns their receipts, in order.
    /// Throws when the transaction fails (the database is unreachable, say): nothing of it was
    /// stored.
    public func append(_ items: [ChannelLogAppend]) async throws -> [ChannelLogReceipt] {
        guard !items.isEmpty else { return [] }
        return try await withCheckedThrowingContinuation { continuation in
            waiting.append(Waiting(items: items, continuation: continuation))
            if !running {
                running = true
                Task { await self.drain() }
            }
        }
    }

    private func drain() async {
        while !waiting.isEmpty {
            var batch: [Waiting] = []
            var count = 0
            while let first = waiting.first, batch.isEmpty || count + first.items.count <= maxBatch {
                batch.append(waiting.removeFirst())
                count += first.items.count
            }
            do {
                let receipts = try await log.append(batch.flatMap(\.items), node: node)
                commits += 1
                committed += receipts.count
                var start = 0
                for request in batch {
                    request.continuation.resume(returning: Array(receipts[start..<(start + request.items.count)]))
                    start += request.items.count
                }
                wakeFollowers()
            } catch {
                for request in batch { request.continuation.resume(throwing: error) }
            }
        }
        running = false
    }

    /// One `NOTIFY` at a time, outside every publish transaction; commits during one are
    /// covered by one more.
    private func wakeFollowers() {
        guard !notifying else {
            notifyAgain = true
            return
        }
        notifying = true
        Task {
            repeat {
                notifyAgain = false
                do { try await log.notify() } catch { logger.debug("NOTIFY failed (followers poll)", metadata: ["error": "\(error)"]) }
            } while notifyAgain
            notifying = false
        }
    }
}
