import DequeModule

/// The most recent client message ids of one sender and what they produced, so that a resent
/// request (after a reconnection) is answered again instead of being acted on twice (SPEC M-3).
/// Keeps at most `capacity` ids, forgetting the oldest.
struct RecentIDs<Value> {
    private var values: [UInt64: Value] = [:]
    private var order: Deque<UInt64> = []
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    subscript(id: UInt64) -> Value? { values[id] }

    mutating func remember(_ id: UInt64, _ value: Value) {
        if values.updateValue(value, forKey: id) == nil { order.append(id) }
        while order.count > capacity, let oldest = order.popFirst() { values[oldest] = nil }
    }
}
extension RecentIDs: Sendable where Value: Sendable {}
