/// The one place the tests poll: a condition on state that has no event to await (a server's
/// counters, a database row, a process's exit) is checked every `interval` until it holds or
/// `timeout` passes. The wait ends as soon as it holds; the deadline only bounds a failure.
public func eventually(
    within timeout: Duration,
    every interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    try await firstValue(within: timeout, every: interval) { try await condition() ? true : nil } ?? false
}

/// The first non-nil value `produce` returns, polled every `interval` until `timeout` passes
/// (then one last try). For waits whose result the test reads: a reply, a page, a retried call.
public func firstValue<Value>(
    within timeout: Duration,
    every interval: Duration = .milliseconds(10),
    _ produce: () async throws -> Value?
) async rethrows -> Value? {
    let end = ContinuousClock.now + timeout
    while ContinuousClock.now < end {
        if let value = try await produce() { return value }
        // The single polling sleep of the test targets: a short pause between checks.
        try? await Task.sleep(for: interval)
    }
    return try await produce()
}

/// `operation`'s result, or nil if it has not finished within `timeout` (it is then cancelled).
/// Bounds a wait on an event so that one that never comes fails the test instead of hanging it.
public func withDeadline<Value: Sendable>(
    _ timeout: Duration,
    _ operation: @escaping @Sendable () async throws -> Value
) async -> Value? {
    await withTaskGroup(of: Value?.self) { group in
        group.addTask { try? await operation() }
        group.addTask {
            // The deadline itself, not a wait for a result: the group ends at the first answer.
            try? await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        return await group.next() ?? nil
    }
}
