import DequeModule
import NIOCore

/// The authorization hook's decisions kept for reuse, as a value (time passed in): an allow or
/// a deny for an event, user and channel, until it expires. At most `capacity` are kept; past
/// it the oldest go first.
struct HookDecisionCache: Sendable {
    struct Key: Hashable, Sendable {
        let event: HookEvent
        let appId: String
        let userId: String
        let channel: String?
    }

    private var entries: [Key: (verdict: HookVerdict, expires: NIODeadline)] = [:]
    /// Insertion order, for eviction (a key may appear again after it was replaced; stale
    /// entries are skipped).
    private var order: Deque<(key: Key, expires: NIODeadline)> = []
    let capacity: Int

    init(capacity: Int) { self.capacity = max(0, capacity) }

    /// The decision kept for `key`, unless it has expired.
    func verdict(for key: Key, now: NIODeadline) -> HookVerdict? {
        guard let entry = entries[key], entry.expires > now else { return nil }
        return entry.verdict
    }

    /// Keeps `verdict` for `key` until `expires`.
    mutating func keep(_ verdict: HookVerdict, for key: Key, until expires: NIODeadline) {
        guard capacity > 0 else { return }
        entries[key] = (verdict, expires)
        order.append((key, expires))
        while entries.count > capacity || order.count > 2 * capacity, let oldest = order.popFirst() {
            if entries[oldest.key]?.expires == oldest.expires { entries[oldest.key] = nil }
        }
    }

    /// Forgets expired decisions at the front of the order (called as decisions are added).
    mutating func dropExpired(now: NIODeadline) {
        while let oldest = order.first, oldest.expires <= now {
            order.removeFirst()
            if entries[oldest.key]?.expires == oldest.expires { entries[oldest.key] = nil }
        }
    }

    var count: Int { entries.count }
}
