import NIOCore
import Testing
@testable import RTMPostgres

/// `BoundedCall`: a call that never ends (as one written to a pooled connection that had just
/// closed) still gives its caller an answer: at the deadline, or at once when it is cancelled.
struct BoundedCallTests {
    /// Waits for ever and ignores cancellation, as the lost query did.
    private static func never() async -> Int {
        await withCheckedContinuation { (_: CheckedContinuation<Int, Never>) in }
    }

    @Test("issue 13 item 5: a call that never ends fails with TimedOut at its deadline; a quick one returns its value; an error passes through")
    func deadline() async throws {
        #expect(try await BoundedCall.run("quick", timeout: .seconds(5)) { 42 } == 42)
        await #expect(throws: BoundedCall.TimedOut.self) {
            try await BoundedCall.run("a lost query", timeout: .milliseconds(50)) { await Self.never() }
        }
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await BoundedCall.run("refused", timeout: .seconds(5)) { () async throws -> Int in throw Refused() }
        }
    }

    @Test("issue 13 item 5: cancelling the caller ends a call that never ends at once (a backplane can be stopped)")
    func cancellation() async throws {
        let waiting = Task { try await BoundedCall.run("a lost query", timeout: .seconds(3600)) { await Self.never() } }
        try await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        // Cancelled before it starts: at once too.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await BoundedCall.run("a lost query", timeout: .seconds(3600)) { await Self.never() }
        }
        await #expect(throws: CancellationError.self) { try await early.value }
    }
}
