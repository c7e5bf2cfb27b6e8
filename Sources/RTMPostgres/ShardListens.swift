import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// The follower's `LISTEN`s on the shard channels of the data channels it follows
/// (`ChannelLogShards`), one task each on the node's listening connection; each hands its
/// notifications' messages to `announce`. A shard no longer needed is left (`UNLISTEN`).
final class ShardListens: Sendable {
    private struct State {
        /// Each shard's listening task, with its number.
        var tasks: [Int: (id: Int, task: Task<Void, Never>)] = [:]
        /// Shards whose `LISTEN` is in effect now, with the number of the task that listens.
        var active: [Int: Int] = [:]
        var started = 0
        var stopped = false
        /// Shards a caller of `waitListening` waits for now (how many callers each).
        var awaited: [Int: Int] = [:]
    }

    private let listener: PostgresListener
    private let retryInterval: TimeAmount
    private let logger: Logger
    private let announce: @Sendable ([ChannelLogEntry]?) -> Void
    private let state = NIOLockedValueBox(State())

    /// `announce`: a notification's messages (nil: a plain wake-up, read the log).
    init(listener: PostgresListener, retryInterval: TimeAmount, logger: Logger, announce: @escaping @Sendable ([ChannelLogEntry]?) -> Void) {
        self.listener = listener
        self.retryInterval = retryInterval
        self.logger = logger
        self.announce = announce
    }

    /// Shards listened on (or being opened).
    var shards: Set<Int> { state.withLockedValue { Set($0.tasks.keys) } }

    /// Listens on exactly `shards` from now on.
    func set(_ shards: Set<Int>) {
        let (started, stopped): ([(Int, Int)], [Task<Void, Never>]) = state.withLockedValue { state in
            guard !state.stopped else { return ([], []) }
            let gone = state.tasks.keys.filter { !shards.contains($0) }
            let stopped = gone.compactMap { state.tasks.removeValue(forKey: $0)?.task }
            for shard in gone { state.active[shard] = nil }
            var started: [(Int, Int)] = []
            for shard in shards where state.tasks[shard] == nil {
                state.started += 1
                started.append((shard, state.started))
            }
            return (started, stopped)
        }
        for task in stopped { task.cancel() }
        for (shard, id) in started {
            let task = Task { await self.listen(shard, id: id) }
            let kept = state.withLockedValue { state in
                guard !state.stopped, state.tasks[shard] == nil else { return false }
                state.tasks[shard] = (id, task)
                return true
            }
            if !kept { task.cancel() }
        }
    }

    /// Waits until every one of `shards` listens, at most `timeout` (a connection that is down
    /// does not hold the caller: the follower polls meanwhile).
    func waitListening(_ shards: Set<Int>, timeout: TimeAmount) async {
        state.withLockedValue { state in for shard in shards { state.awaited[shard, default: 0] += 1 } }
        defer {
            state.withLockedValue { state in
                for shard in shards {
                    let left = (state.awaited[shard] ?? 1) - 1
                    state.awaited[shard] = left > 0 ? left : nil
                }
            }
        }
        let deadline = NIODeadline.now() + timeout
        while !Task.isCancelled, NIODeadline.now() < deadline {
            if state.withLockedValue({ state in state.stopped || shards.allSatisfy { state.active[$0] != nil } }) { return }
            try? await Task.sleep(nanoseconds: 2_000_000)
        }
    }

    /// Stops every listen (the follower stops).
    func stop() {
        let tasks = state.withLockedValue { state in
            state.stopped = true
            defer { state.tasks = [:]; state.active = [:] }
            return state.tasks.values.map(\.task)
        }
        for task in tasks { task.cancel() }
    }

    private func listen(_ shard: Int, id: Int) async {
        let channel = ChannelLogShards.notificationChannel(shard: shard)
        var again = false
        while !Task.isCancelled {
            do {
                try await listener.listen(on: channel, logger: logger) { notifications in
                    let awaited = state.withLockedValue { state in
                        if (state.tasks[shard]?.id ?? id) == id { state.active[shard] = id }
                        return state.awaited[shard] != nil
                    }
                    // What was announced there before the LISTEN took effect is read, unless
                    // the follower waits for it to read where its channels start
                    // (`waitListening`): listening again after the connection was lost, or late
                    // (after the wait gave up).
                    if again || !awaited { announce(nil) }
                    again = true
                    for try await notification in notifications {
                        announce(ChannelLogNotice.decode(notification.payload))
                    }
                }
            } catch {
                if !Task.isCancelled { logger.debug("a shard's listen ended; listening again", metadata: ["shard": "\(shard)", "error": "\(error)"]) }
            }
            state.withLockedValue { state in if state.active[shard] == id { state.active[shard] = nil } }
            if Task.isCancelled { return }
            try? await Task.sleep(nanoseconds: UInt64(retryInterval.nanoseconds))
        }
    }
}
