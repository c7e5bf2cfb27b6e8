import NIOCore
import NIOPosix
import RTMTestSupport
import Synchronization
import Testing
@testable import RTMPostgres

/// `BoundedCall`: a call that never ends (as one written to a pooled connection that had just
/// closed) still gives its caller an answer: at the deadline, or at once when it is cancelled.
@Suite(.realTime)
struct BoundedCallTests {
    /// Calls that ignore cancellation and end only when the test releases them, as the lost
    /// query never ended. Released at the end of each test, so no task is left waiting and no
    /// continuation is dropped unresumed.
    final class Stuck: Sendable {
        private let state = Mutex<(released: Bool, waiting: [CheckedContinuation<Int, Never>])>((false, []))

        func call() async -> Int {
            await withCheckedContinuation { continuation in
                let released = state.withLock { state in
                    if !state.released { state.waiting.append(continuation) }
                    return state.released
                }
                if released { continuation.resume(returning: 0) }
            }
        }

        /// Calls waiting now.
        var waiting: Int { state.withLock { $0.waiting.count } }

        func release() {
            let waiting = state.withLock { state in
                state.released = true
                defer { state.waiting = [] }
                return state.waiting
            }
            for continuation in waiting { continuation.resume(returning: 0) }
        }
    }

    @Test("A call that never ends fails with TimedOut at its deadline; a quick one returns its value; an error passes through")
    func deadline() async throws {
        let stuck = Stuck()
        defer { stuck.release() }
        #expect(try await BoundedCall.run("quick", timeout: .seconds(5)) { 42 } == 42)
        await #expect(throws: BoundedCall.TimedOut.self) {
            try await BoundedCall.run("a lost query", timeout: .milliseconds(50)) { await stuck.call() }
        }
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await BoundedCall.run("refused", timeout: .seconds(5)) { () async throws -> Int in throw Refused() }
        }
    }

    @Test("Cancelling the caller ends a call that never ends at once (a backplane can be stopped)")
    func cancellation() async throws {
        let stuck = Stuck()
        defer { stuck.release() }
        let waiting = Task { try await BoundedCall.run("a lost query", timeout: .seconds(3600)) { await stuck.call() } }
        #expect(await eventually(within: .seconds(5)) { stuck.waiting == 1 })   // the call is under way
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        // Cancelled before it starts: at once too.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await BoundedCall.run("a lost query", timeout: .seconds(3600)) { await stuck.call() }
        }
        await #expect(throws: CancellationError.self) { try await early.value }
    }

    @Test("The deadlines share one timer: a call added after a later one still expires at its own deadline, an ended call never does, the timer re-arms for what is left")
    func sharedDeadlines() async throws {
        let deadlines = CallDeadlines(loop: MultiThreadedEventLoopGroup.singleton.any())
        let expired = Mutex<[String]>([])
        let start = NIODeadline.now()
        let late = deadlines.add(deadline: start + .seconds(60)) { expired.withLock { $0.append("late") } }
        let ended = deadlines.add(deadline: start + .milliseconds(30)) { expired.withLock { $0.append("ended") } }
        deadlines.remove(ended)
        // Added after the 60 s one, due much earlier: the timer is re-armed for it.
        let gotEarly: Void = await withCheckedContinuation { continuation in
            _ = deadlines.add(deadline: start + .milliseconds(50)) {
                expired.withLock { $0.append("early") }
                continuation.resume()
            }
        }
        _ = gotEarly
        let waited = NIODeadline.now() - start
        #expect(waited >= .milliseconds(50) && waited < .seconds(30), "expired after \(waited.nanoseconds / 1_000_000) ms")
        let second: Void = await withCheckedContinuation { continuation in
            _ = deadlines.add(deadline: .now() + .milliseconds(20)) { continuation.resume() }
        }
        _ = second
        #expect(expired.withLock { $0 } == ["early"], "the ended call and the 60 s one did not expire")
        #expect(deadlines.pending == 1)
        deadlines.remove(late)
        #expect(deadlines.pending == 0)
    }
}
