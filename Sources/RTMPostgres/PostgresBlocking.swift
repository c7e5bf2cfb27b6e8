import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import RTMServer

/// Runs `body` (postgres-nio's async API) and blocks the calling thread until it ends or
/// `timeout` passes. For the stores RTMServer calls synchronously from dedicated threads (the
/// user-message store's own, the storage queue), never from an event loop.
func blockingCall<T: Sendable>(timeout: TimeAmount, _ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let result = NIOLockedValueBox<Result<T, any Error>?>(nil)
    let task = Task {
        do {
            let value = try await body()
            result.withLockedValue { $0 = .success(value) }
        } catch {
            result.withLockedValue { $0 = .failure(error) }
        }
        done.signal()
    }
    guard done.wait(timeout: .now() + .nanoseconds(Int(timeout.nanoseconds))) == .success,
          let outcome = result.withLockedValue({ $0 }) else {
        task.cancel()
        throw PostgresStoreTimeout(seconds: Double(timeout.nanoseconds) / 1e9)
    }
    return try outcome.get()
}

/// The database did not answer a store call in time.
public struct PostgresStoreTimeout: DatabaseTimeout {
    public let seconds: Double
    public var description: String { "the database did not answer within \(seconds) s" }
}
