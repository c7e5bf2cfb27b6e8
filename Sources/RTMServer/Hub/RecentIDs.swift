/// The most recent client message ids of one sender and what they produced, so that a resent
/// request (after a reconnection) is answered again instead of being acted on twice (SPEC M-3).
/// Keeps the last `capacity` ids in a ring.
///
/// Clients number their messages upwards (the SDK does, from a random start per instance), so
/// an id above every remembered one cannot be a resend and needs no search: the publish path
/// costs no hashing. An id at or below the highest remembered (a resend, or a new client
/// instance that started lower than the last one: half of all app restarts) is looked up in an
/// index of the ring, built on the first such lookup and kept up to date from then on, so a
/// restarted client costs one hash per message rather than a scan of the whole ring.
struct RecentIDs<Value> {
    private var ids: [UInt64] = []
    private var values: [Value] = []
    private var next = 0
    private var highest: UInt64 = 0
    /// Ring position of each remembered id; nil until a lookup needs it.
    private var index: [UInt64: Int]?
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Whether an index has been built (for tests: the fast path builds none).
    var isIndexed: Bool { index != nil }

    subscript(id: UInt64) -> Value? {
        mutating get {
            guard id <= highest, !ids.isEmpty else { return nil }
            if index == nil {
                var built = [UInt64: Int](minimumCapacity: ids.count)
                for (position, remembered) in ids.enumerated() { built[remembered] = position }
                index = built
            }
            return index![id].map { values[$0] }
        }
    }

    mutating func remember(_ id: UInt64, _ value: Value) {
        if ids.count < capacity {
            index?[id] = ids.count
            ids.append(id)
            values.append(value)
            next = ids.count % capacity
            highest = max(highest, id)
        } else {
            let evicted = ids[next]
            if index != nil {
                if index![evicted] == next { index![evicted] = nil }
                index![id] = next
            }
            ids[next] = id
            values[next] = value
            next = (next + 1) % capacity
            // `highest` is the highest id *remembered*: recomputed when that one leaves.
            highest = evicted == highest && id < highest ? ids.max() ?? id : max(highest, id)
        }
    }
}

extension RecentIDs: Sendable where Value: Sendable {}
