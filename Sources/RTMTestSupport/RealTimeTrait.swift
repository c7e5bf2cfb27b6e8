import Testing

/// A suite or test that runs real servers, sockets, processes or timers: each of its tests
/// runs holding one of the process's `RealTimeSlots`, so that only a few such tests share the
/// machine's cores at once, however many the test run starts together.
///
/// ```swift
/// @Suite(.realTime, .serialized)
/// struct FaultTests { … }
/// ```
public struct RealTimeTrait: TestTrait, SuiteTrait, TestScoping {
    /// Applied to every test of a suite it is given to.
    public var isRecursive: Bool { true }

    /// A test function's cases each take a slot; a suite itself takes none (its tests do).
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> RealTimeTrait? {
        test.isSuite || testCase == nil ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        try await RealTimeSlots.shared.withSlot { try await function() }
    }
}

extension Trait where Self == RealTimeTrait {
    /// Runs real servers, sockets, processes or timers: at most a few such tests at once.
    public static var realTime: RealTimeTrait { RealTimeTrait() }
}
