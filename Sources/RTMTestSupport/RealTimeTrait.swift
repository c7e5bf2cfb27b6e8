import Testing

/// A suite or test that runs real servers, sockets, processes or timers: each of its tests
/// runs holding one of the process's `RealTimeSlots` (or all of them: `.realTimeAlone`), so
/// that only a few such tests share the machine's cores at once, however many the test run
/// starts together; and in a `TestResources` scope, which stops the servers and processes it
/// started when it ends, whatever it threw.
///
/// ```swift
/// @Suite(.realTime, .serialized)
/// struct FaultTests { … }
/// ```
///
/// Give it to top-level suites only: a test under two of them would wait for itself.
public struct RealTimeTrait: TestTrait, SuiteTrait, TestScoping {
    /// Whether each test takes every slot: no other real-time test runs beside it.
    public let alone: Bool

    /// Applied to every test of a suite it is given to.
    public var isRecursive: Bool { true }

    /// A test function's cases each take slots; a suite itself takes none (its tests do).
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> RealTimeTrait? {
        test.isSuite || testCase == nil ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let slots = RealTimeSlots.shared
        try await slots.withSlots(alone ? slots.width : 1) {
            try await TestResources.scoped { try await function() }   // its servers and processes stopped while it holds its slots
        }
    }
}

extension Trait where Self == RealTimeTrait {
    /// Runs real servers, sockets, processes or timers: at most a few such tests at once.
    public static var realTime: RealTimeTrait { RealTimeTrait(alone: false) }

    /// Measures the whole test process (its memory, descriptors or threads, a latency
    /// percentile, a pace on the wall clock): runs with no other real-time test beside it.
    public static var realTimeAlone: RealTimeTrait { RealTimeTrait(alone: true) }
}
