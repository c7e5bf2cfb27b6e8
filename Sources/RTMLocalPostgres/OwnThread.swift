import Foundation

/// Runs `work` on a thread of its own and returns its result when it ends.
///
/// For work that blocks its thread (waiting for a child process, a blocking read): done inline
/// in an `async` function it would hold one of the Swift concurrency pool's threads, and the
/// pool has one per core (two on a 2-core machine), so every other task in the process (other
/// tests' timers, servers' replies, deadlines) would wait behind it.
///
/// ```swift
/// let output = try await onOwnThread { try runToEnd("/usr/bin/openssl", arguments) }
/// ```
public func onOwnThread<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
