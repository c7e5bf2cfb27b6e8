import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import RTMServer

/// Runs one database call with a deadline that does not depend on the call giving up.
///
/// PostgresNIO's pool can lease a connection whose socket has just closed (the pool hears of
/// the close a moment later). The query written to it is dropped with the connection's
/// handlers and its promise is never completed, so the call waits for ever and ignores
/// cancellation. Found with a database stopped and started under two nodes, eight times in a
/// row: now and then both nodes' log followers stopped for good and their backplanes could not
/// be stopped. Every call a node's long-running loops make (the log follower, the group commit,
/// the lease, the lock sweep, the trim) goes through here instead: after `timeout`, or when
/// the waiting task is cancelled, the caller gets an error at once and the call is left
/// behind (cancelled; if it ever ends, its result is dropped).
enum BoundedCall {
    /// The call did not end in time.
    struct TimedOut: DatabaseTimeout {
        let operation: String
        let timeout: TimeAmount
        var description: String { "the database did not answer \(operation) within \(Double(timeout.nanoseconds) / 1e9) s" }
    }

    /// The first of: `body`'s result, `TimedOut` after `timeout`, or `CancellationError` when
    /// the calling task is cancelled.
    @discardableResult
    static func run<T: Sendable>(_ operation: String, timeout: TimeAmount,
                                 _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await race(body) { call, work in
            // One shared timer for every call's deadline (`CallDeadlines`), not one per call.
            let deadlines = CallDeadlines.shared
            let token = deadlines.add(deadline: .now() + timeout) {
                work.cancel()
                call.finish(.failure(TimedOut(operation: operation, timeout: timeout)))
            }
            call.onFinish { work.cancel(); deadlines.remove(token) }
        }
    }

    /// The connection a call was using closed before the call ended: whatever it sent may or may
    /// not have been done.
    struct ConnectionClosedMidCall: Error, CustomStringConvertible {
        var description: String { "the database connection closed during the call" }
    }

    /// The first of: `body`'s result, `ConnectionClosedMidCall` when `connection` closes (the
    /// connection `body` uses), or `CancellationError` when the calling task is cancelled.
    /// Whichever comes first; the body is then cancelled and left behind.
    static func untilClosed<T: Sendable>(_ connection: PostgresConnection,
                                         _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await race(body) { call, work in
            let token = ClosingConnections.shared.watch(connection) { call.finish(.failure(ConnectionClosedMidCall())) }
            call.onFinish {
                work.cancel()
                ClosingConnections.shared.unwatch(connection, token)
            }
        }
    }

    /// Runs `body` in a task of its own and returns the first of its result, what `arm` makes
    /// the call finish with (`arm` is given the call and the task as they start), or
    /// `CancellationError` when the calling task is cancelled.
    private static func race<T: Sendable>(_ body: @escaping @Sendable () async throws -> T,
                                          arm: (Pending<T>, Task<Void, Never>) -> Void) async throws -> T {
        let call = Pending<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                call.wait(continuation)
                let work = Task {
                    let result: Result<T, any Error>
                    do { result = .success(try await body()) } catch { result = .failure(error) }
                    call.finish(result)
                }
                arm(call, work)
                if Task.isCancelled { call.finish(.failure(CancellationError())) }
            }
        } onCancel: {
            call.finish(.failure(CancellationError()))
        }
    }

    /// The waiting side of one call: resumed once, by whichever comes first.
    private final class Pending<T: Sendable>: Sendable {
        private struct State {
            var continuation: CheckedContinuation<T, any Error>?
            var early: Result<T, any Error>?
            var cleanup: (@Sendable () -> Void)?
            var done = false
        }
        private let state = NIOLockedValueBox(State())

        func wait(_ continuation: CheckedContinuation<T, any Error>) {
            let early: Result<T, any Error>? = state.withLockedValue { state in
                if let early = state.early { return early }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(with: early) }
        }

        func onFinish(_ cleanup: @escaping @Sendable () -> Void) {
            let finished = state.withLockedValue { state in
                if state.done { return true }
                state.cleanup = cleanup
                return false
            }
            if finished { cleanup() }
        }

        func finish(_ result: Result<T, any Error>) {
            let (continuation, cleanup): (CheckedContinuation<T, any Error>?, (@Sendable () -> Void)?) = state.withLockedValue { state in
                guard !state.done else { return (nil, nil) }
                state.done = true
                defer { state.continuation = nil; state.cleanup = nil }
                if state.continuation == nil { state.early = result }
                return (state.continuation, state.cleanup)
            }
            continuation?.resume(with: result)
            cleanup?()
        }
    }
}
