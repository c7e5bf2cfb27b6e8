import NIOConcurrencyHelpers

/// What a test started and must stop when it ends, whatever it threw: its servers, `rtm`
/// processes, backends. A test's scope (`RealTimeTrait` gives one to each real-time test) stops
/// every resource registered in it after the test's body, in the reverse order of their starts,
/// awaiting each, so that nothing outlives a failed expectation and no test needs a trailing
/// `stop()` (which a thrown expectation skips) or a `defer` (which cannot await).
///
/// The body of the test stays a function, not a closure handed to a `with { … }` helper: in a
/// closure, Swift 6.3's macro expansion can give a closure written inside `#expect(…)` and a
/// later closure of the same body one symbol, so the later call runs the earlier closure (a
/// predicate that silently never matches).
public final class TestResources: Sendable {
    @TaskLocal private static var current: TestResources?

    private let stops = NIOLockedValueBox<[@Sendable () async -> Void]>([])

    private init() {}

    /// Stops the resource with `stop` when the current test ends. Outside a test scope (a test
    /// without the real-time trait) nothing is registered and the caller stops it itself.
    public static func register(_ stop: @escaping @Sendable () async -> Void) {
        current?.stops.withLockedValue { $0.append(stop) }
    }

    /// Runs `body` in a scope of its own, then stops what it registered, whether it returned or threw.
    public static func scoped(_ body: () async throws -> Void) async throws {
        let resources = TestResources()
        do {
            try await $current.withValue(resources) { try await body() }
        } catch {
            await resources.stopAll()
            throw error
        }
        await resources.stopAll()
    }

    private func stopAll() async {
        let registered = stops.withLockedValue { stops in
            defer { stops = [] }
            return stops
        }
        for stop in registered.reversed() { await stop() }
    }
}
