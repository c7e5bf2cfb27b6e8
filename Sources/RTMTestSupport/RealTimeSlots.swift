import Foundation
import NIOConcurrencyHelpers

/// The process-wide limit on tests that run real servers, sockets, processes and timers at
/// once (`.realTime`).
///
/// Swift Testing starts every test of the process at once. Pure value tests finish in
/// microseconds, but hundreds of tests each with servers, clients and timers on a 2-core
/// machine leave every timer late: a client with a 100 ms heartbeat is declared lost because
/// its thread did not run for 300 ms. At most `width` of them run at a time (the environment's
/// `RTM_REAL_TIME_TESTS`, else 4); the others wait for a slot, first come first served, before
/// they start anything. A test that measures the whole process (its memory, its threads, a
/// latency percentile) takes every slot (`.realTimeAlone`).
public final class RealTimeSlots: Sendable {
    /// The slots of this test process.
    public static let shared = RealTimeSlots(width: {
        if let text = ProcessInfo.processInfo.environment["RTM_REAL_TIME_TESTS"], let width = Int(text), width > 0 { return width }
        return 4
    }())

    /// How many slots there are.
    public let width: Int

    private struct Waiter {
        let slots: Int
        let continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var free: Int
        var waiting: [Waiter] = []

        /// Takes the slots of the waiters at the head of the queue that now fit, in order (a
        /// waiter for every slot is not overtaken by later waiters for one).
        mutating func admit() -> [CheckedContinuation<Void, Never>] {
            var admitted: [CheckedContinuation<Void, Never>] = []
            while let first = waiting.first, first.slots <= free {
                free -= first.slots
                admitted.append(waiting.removeFirst().continuation)
            }
            return admitted
        }
    }
    private let state: NIOLockedValueBox<State>

    /// `width` slots.
    public init(width: Int) {
        self.width = width
        state = NIOLockedValueBox(State(free: width))
    }

    /// Runs `body` holding `slots` slots (at most `width`), waiting for them first.
    public func withSlots<Result>(_ slots: Int = 1, _ body: () async throws -> Result) async rethrows -> Result {
        let slots = min(max(slots, 1), width)
        await withCheckedContinuation { continuation in
            let admitted = state.withLockedValue { state in
                state.waiting.append(Waiter(slots: slots, continuation: continuation))
                return state.admit()
            }
            for waiter in admitted { waiter.resume() }
        }
        defer {
            let admitted = state.withLockedValue { state in
                state.free += slots
                return state.admit()
            }
            for waiter in admitted { waiter.resume() }
        }
        return try await body()
    }
}
