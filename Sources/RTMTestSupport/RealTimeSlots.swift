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
/// they start anything.
public final class RealTimeSlots: Sendable {
    /// The slots of this test process.
    public static let shared = RealTimeSlots(width: {
        if let text = ProcessInfo.processInfo.environment["RTM_REAL_TIME_TESTS"], let width = Int(text), width > 0 { return width }
        return 4
    }())

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: NIOLockedValueBox<State>

    /// `width` slots.
    public init(width: Int) {
        state = NIOLockedValueBox(State(free: width))
    }

    /// Runs `body` holding a slot, waiting for one first.
    public func withSlot<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { continuation in
            let granted = state.withLockedValue { state in
                guard state.free > 0 else {
                    state.waiting.append(continuation)
                    return false
                }
                state.free -= 1
                return true
            }
            if granted { continuation.resume() }
        }
    }

    private func release() {
        // The slot goes straight to the first waiter, if any.
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
