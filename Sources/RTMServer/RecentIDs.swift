/// The most recent client message ids of one sender and what they produced, so that a resent
/// request (after a reconnection) is answered again instead of being acted on twice (SPEC M-3).
/// Keeps the last `capacity` ids in a ring.
///
/// Clients number their messages upwards (the SDK does, from a random start per instance), so
/// an id above every remembered one cannot be a resend and needs no search: the publish path
/// costs no hashing. Only an id at or below the highest remembered (a resend, or a new client
/// instance that started lower, until its ids have replaced the old ones) is looked up in the ring.
struct RecentIDs<Value> {
    private var ids: [UInt64] = []
    private var values: [Value] = []
    private var next = 0
    private var highest: UInt64 = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    subscript(id: UInt64) -> Value? {
        guard id <= highest, !ids.isEmpty else { return nil }
        // Newest first: a resend is usually recent.
        var index = next
        for _ in 0..<ids.count {
            index = index == 0 ? ids.count - 1 : index - 1
            if ids[index] == id { return values[index] }
        }
        return nil
    }

    mutating func remember(_ id: UInt64, _ value: Value) {
        if ids.count < capacity {
            ids.append(id)
            values.append(value)
            next = ids.count % capacity
            highest = max(highest, id)
        } else {
            let evicted = ids[next]
            ids[next] = id
            values[next] = value
            next = (next + 1) % capacity
            // `highest` is the highest id *remembered*: recomputed when that one leaves.
            highest = evicted == highest && id < highest ? ids.max() ?? id : max(highest, id)
        }
    }
}

extension RecentIDs: Sendable where Value: Sendable {}
