import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Sends this node's cluster events (`ClusterEvent`) through the backplane, one batch at a
/// time and in the order they happened: the events wait in `HubState`'s outbox (appended under
/// the hub's lock, so their order is the order of the changes), and this single sender takes
/// whatever is there each time it is woken. A batch that cannot be committed (the database is
/// down) is retried, before anything newer, every `retryInterval` until it is, or until `stop`.
final class ClusterSender: Sendable {
    private let wakeups: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)
    private let stopping = NIOLockedValueBox(false)
    private let retryInterval: TimeAmount

    init(retryInterval: TimeAmount) {
        (wakeups, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.retryInterval = retryInterval
    }

    /// Something may be in the outbox.
    func wake() { continuation.yield() }

    /// Starts sending: `take` empties the outbox, `publish` commits a batch in order.
    func start(take: @escaping @Sendable () -> [ClusterEvent], publish: @escaping @Sendable ([ClusterEvent]) async throws -> Void,
               logger: Logger) {
        let wakeups = self.wakeups, retry = self.retryInterval, stopping = self.stopping
        let running = Task {
            var pending: [ClusterEvent] = []
            for await _ in wakeups {
                while true {
                    pending += take()
                    guard !pending.isEmpty else { break }
                    do {
                        try await publish(pending)
                        pending = []
                    } catch {
                        // Stopping: one attempt only (the others time the sessions out anyway).
                        if stopping.withLockedValue({ $0 }) {
                            logger.warning("cluster events not sent before stopping", metadata: ["events": "\(pending.count)", "error": "\(error)"])
                            return
                        }
                        logger.warning("cluster events not sent yet: retrying", metadata: ["events": "\(pending.count)", "error": "\(error)"])
                        try? await Task.sleep(nanoseconds: UInt64(retry.nanoseconds))
                    }
                }
            }
        }
        task.withLockedValue { $0 = running }
    }

    /// Sends what is left (a last attempt when the database is down) and stops.
    func stop() async {
        stopping.withLockedValue { $0 = true }
        continuation.yield()
        continuation.finish()
        let running = task.withLockedValue { $0 }
        await running?.value
    }
}
