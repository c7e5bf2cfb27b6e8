import PostgresNIO

/// A node's one writer to the channel log: group commit. Publishes that arrive while a
/// transaction runs wait and go into the next one together (one transaction for many
/// messages, sized by load), so the database sees few, large transactions. Each transaction
/// announces its messages to the followers at its commit (`PostgresChannelLog.append`'s
/// `announce`: its `NOTIFY`s carry them when they fit `ChannelLogNotice`).
public actor ChannelLogWriter {
    private struct Waiting {
        let items: [ChannelLogAppend]
        let continuation: CheckedContinuation<[ChannelLogReceipt], any Error>
    }

    private let log: PostgresChannelLog
    private let node: String
    private let maxBatch: Int
    private var waiting: [Waiting] = []
    /// The task that runs the group commits while any wait (cancelled by `abandonInFlight`
    /// while a commit is in flight, and then replaced).
    private var draining: Task<Void, Never>?
    /// A group commit is in flight: `draining` waits for the database.
    private var inFlight = false
    /// Transactions committed so far.
    public private(set) var commits = 0
    /// Messages committed so far.
    public private(set) var committed = 0

    /// `maxBatch`: the most messages in one transaction (a larger wait is split). A group commit
    /// that gets no answer within the log's `callTimeout` (a database that cannot be reached,
    /// a connection that died under it) fails, and its publishes are refused
    /// (`PostgresChannelLog`'s deadline, `BoundedCall`).
    public init(log: PostgresChannelLog, node: String, maxBatch: Int = 5_000) {
        self.log = log
        self.node = node
        self.maxBatch = max(1, maxBatch)
    }

    /// Appends `items` (all committed in one transaction) and returns their receipts, in order.
    /// Throws when the transaction fails (the database is unreachable, say): nothing of it was
    /// stored.
    public func append(_ items: [ChannelLogAppend]) async throws -> [ChannelLogReceipt] {
        guard !items.isEmpty else { return [] }
        return try await withCheckedThrowingContinuation { continuation in
            waiting.append(Waiting(items: items, continuation: continuation))
            if draining == nil { startDraining() }
        }
    }

    private func startDraining() {
        draining = Task { await self.drain() }
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
                inFlight = true
                defer { inFlight = false }
                // In this task, which `abandonInFlight` cancels (a task per commit cost a
                // thread wake-up per commit).
                let receipts = try await log.append(batch.flatMap(\.items), node: node, announce: true)
                commits += 1
                committed += receipts.count
                var start = 0
                for request in batch {
                    request.continuation.resume(returning: Array(receipts[start..<(start + request.items.count)]))
                    start += request.items.count
                }
            } catch {
                for request in batch { request.continuation.resume(throwing: error) }
            }
            // Abandoned: this task is cancelled, so its next call would fail at once; a new
            // task takes the rest.
            if Task.isCancelled { break }
        }
        draining = nil
        if !waiting.isEmpty { startDraining() }
    }

    /// The database link went down (the listening connection lost): the group commit in flight
    /// is refused now rather than when the pool gives up. Its transaction was aborted with its
    /// connection, or it still waits for a connection and never reached the database; only a
    /// commit whose answer was lost with the connection can have been stored (then it is
    /// delivered though its publisher was told it failed).
    public func abandonInFlight() {
        if inFlight { draining?.cancel() }
    }
}
