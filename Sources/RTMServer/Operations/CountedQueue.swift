import Dispatch
import NIOConcurrencyHelpers

/// A serial dispatch queue that knows how many blocks wait on it or run (the `queue` gauge of
/// `rtm_queue_depth`). For queues whose work is not the hot path: the count costs a lock per block.
final class CountedQueue: Sendable {
    private let queue: DispatchQueue
    private let count = NIOLockedValueBox(0)

    init(label: String) { queue = DispatchQueue(label: label) }

    /// Blocks submitted and not finished.
    var depth: Int { count.withLockedValue { $0 } }

    /// Runs `body` after everything submitted before it.
    func async(_ body: @escaping @Sendable () -> Void) {
        count.withLockedValue { $0 += 1 }
        queue.async { [count] in
            body()
            count.withLockedValue { $0 -= 1 }
        }
    }

    /// Runs `body` on the queue and waits for it.
    func sync<T>(_ body: () throws -> T) rethrows -> T { try queue.sync(execute: body) }

    /// Returns once everything submitted before has run.
    func drain() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            async { continuation.resume() }
        }
    }
}
