/// Records values from an async sequence and lets a test await one that matches, with a
/// deadline: no sleep-and-hope, the wait ends as soon as the value arrives.
public actor AsyncRecorder<Value: Sendable> {
    private var values: [Value] = []
    private var waiters: [(id: Int, predicate: @Sendable (Value) -> Bool, continuation: CheckedContinuation<Value?, Never>)] = []
    private var nextID = 0

    /// Starts recording `sequence`.
    public init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Value {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self)
        Task {
            do { for try await value in sequence { continuation.yield(value) } } catch {}
            continuation.finish()
        }
        Task { [weak self] in
            for await value in stream { await self?.append(value) }
        }
    }

    private func append(_ value: Value) {
        values.append(value)
        var remaining: [(id: Int, predicate: @Sendable (Value) -> Bool, continuation: CheckedContinuation<Value?, Never>)] = []
        for waiter in waiters {
            if waiter.predicate(value) { waiter.continuation.resume(returning: value) } else { remaining.append(waiter) }
        }
        waiters = remaining
    }

    /// Everything recorded so far.
    public var all: [Value] { values }

    /// Recorded values matching `predicate`.
    public func matching(_ predicate: (Value) -> Bool) -> [Value] { values.filter(predicate) }

    /// Forgets what was recorded.
    public func clear() { values.removeAll() }

    /// The first value (already recorded, or arriving within `timeout`) matching `predicate`;
    /// nil if none came in time.
    public func first(within timeout: Duration, where predicate: @escaping @Sendable (Value) -> Bool) async -> Value? {
        if let found = values.first(where: predicate) { return found }
        return await next(within: timeout, where: predicate)
    }

    /// A position in the recording, for `first(since:within:where:)`: taken before causing
    /// something, it lets the test find the effect even if it was recorded before the test
    /// started waiting (`next` would miss it). Not valid across `clear()`.
    public func mark() -> Int { values.count }

    /// The first value recorded after `mark` (or arriving within `timeout`) matching `predicate`;
    /// nil if none came in time.
    public func first(since mark: Int, within timeout: Duration, where predicate: @escaping @Sendable (Value) -> Bool) async -> Value? {
        if let found = values[min(mark, values.count)...].first(where: predicate) { return found }
        return await next(within: timeout, where: predicate)
    }

    /// The next value arriving from now on within `timeout` that matches `predicate`.
    public func next(within timeout: Duration, where predicate: @escaping @Sendable (Value) -> Bool) async -> Value? {
        let id = nextID
        nextID += 1
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            waiters.append((id, predicate, continuation))
        }
    }

    private func expire(_ id: Int) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(returning: nil)
    }
}
