import DequeModule
import Foundation
import NIOCore

/// Decides which queued webhook events to POST and when (pure state; `WebhookDispatcher` owns
/// one and performs its actions).
///
/// Events with the same ordering key (one user) go one at a time, in queue order: the next is
/// posted only after the previous was answered with a 2xx, so a receiver sees each user's
/// events in order (at least once: a POST whose answer is lost is sent again). A failure backs
/// that key off exponentially (with jitter) while other keys go on; at most `maxConcurrent`
/// POSTs are in flight, each for a different key. An event that keeps failing for
/// `maxRetryDuration` is dropped, so one stuck user cannot hold its queue for ever.
struct WebhookScheduler {
    /// A queued event.
    struct Item: Sendable, Equatable {
        /// Queue position (the store's row id): increases in emission order.
        let id: Int64
        let key: String
        let eventId: String
        let body: Data
    }

    enum Action: Equatable {
        /// POST this event (`attempt` counts from 1).
        case post(Item, attempt: Int)
        /// Call `wake(now:)` at this time (a backoff ends).
        case wake(at: NIODeadline)
        /// The event was delivered: remove it from the store.
        case delivered(Item)
        /// The event failed for `maxRetryDuration`: remove it, log and count it.
        case expired(Item)
        /// The event was evicted from a full queue while its POST was in flight, and that POST
        /// failed: it is dropped now (count it; its row is already gone).
        case droppedInFlight(Item)
    }

    struct Timing {
        var initialBackoff: TimeAmount
        var maxBackoff: TimeAmount
        var maxRetryDuration: TimeAmount
        var maxConcurrent: Int
    }

    private struct Failures {
        var count: Int
        var first: NIODeadline
        var until: NIODeadline
    }

    let timing: Timing
    private var queues: [String: Deque<Item>] = [:]
    /// Keys with an event to post now, in the order they became ready (fairness).
    private var ready: Deque<String> = []
    private var readySet: Set<String> = []
    private var inFlight: Set<String> = []
    private var failures: [String: Failures] = [:]
    /// In-flight events evicted from the store (queue full): dropped when their POST ends.
    private var evictedInFlight: Set<Int64> = []

    init(timing: Timing) { self.timing = timing }

    /// Events waiting, in flight included.
    var queued: Int { queues.values.reduce(0) { $0 + $1.count } }

    /// Keys with a POST in flight.
    var inFlightKeys: Set<String> { inFlight }

    /// New events, in queue order.
    mutating func enqueue(_ items: [Item], now: NIODeadline) -> [Action] {
        for item in items {
            queues[item.key, default: []].append(item)
            markReady(item.key, now: now)
        }
        return dispatch()
    }

    /// The POST of `item` got a 2xx answer.
    mutating func delivered(_ item: Item, now: NIODeadline) -> [Action] {
        inFlight.remove(item.key)
        failures[item.key] = nil
        evictedInFlight.remove(item.id)
        var actions: [Action] = [.delivered(item)]
        if queues[item.key]?.first?.id == item.id { queues[item.key]?.removeFirst() }
        if queues[item.key]?.isEmpty == true { queues[item.key] = nil }
        markReady(item.key, now: now)
        actions += dispatch()
        return actions
    }

    /// The POST of `item` failed (no answer, a connection error, a non-2xx status). `jitter` in
    /// [0, 1) spreads retries (the delay is between half and all of the exponential step).
    mutating func failed(_ item: Item, now: NIODeadline, jitter: Double) -> [Action] {
        inFlight.remove(item.key)
        guard evictedInFlight.remove(item.id) == nil, queues[item.key]?.first?.id == item.id else {
            // Evicted while in flight (queue full): nothing to retry.
            if queues[item.key]?.first?.id == item.id { queues[item.key]?.removeFirst() }
            if queues[item.key]?.isEmpty == true { queues[item.key] = nil }
            markReady(item.key, now: now)
            return [.droppedInFlight(item)] + dispatch()
        }
        var record = failures[item.key] ?? Failures(count: 0, first: now, until: now)
        record.count += 1
        if now - record.first >= timing.maxRetryDuration {
            failures[item.key] = nil
            queues[item.key]?.removeFirst()
            if queues[item.key]?.isEmpty == true { queues[item.key] = nil }
            markReady(item.key, now: now)
            return [.expired(item)] + dispatch()
        }
        let step = Self.backoff(failures: record.count, timing: timing)
        let delay = TimeAmount.nanoseconds(step.nanoseconds / 2 + Int64(Double(step.nanoseconds / 2) * min(max(jitter, 0), 1)))
        record.until = now + delay
        failures[item.key] = record
        return [.wake(at: record.until)] + dispatch()
    }

    /// A backoff may have ended: keys whose wait is over become ready.
    mutating func wake(now: NIODeadline) -> [Action] {
        for (key, record) in failures where record.until <= now { markReady(key, now: now) }
        return dispatch()
    }

    /// Events removed from the store because the queue was full. Returns how many of them have
    /// a POST in flight: a POST cannot be recalled, so each of those is delivered if it
    /// succeeds, and dropped (`droppedInFlight`) only when it fails. The others are dropped now.
    @discardableResult
    mutating func evict(_ ids: Set<Int64>) -> Int {
        guard !ids.isEmpty else { return 0 }
        var pending = 0
        for key in Array(queues.keys) {
            // An in-flight head stays until its answer (then `delivered` or `failed` drops it).
            let head = inFlight.contains(key) ? queues[key]?.first : nil
            if let head, ids.contains(head.id), evictedInFlight.insert(head.id).inserted { pending += 1 }
            queues[key]?.removeAll { ids.contains($0.id) && $0 != head }
            if queues[key]?.isEmpty == true { queues[key] = nil }
        }
        return pending
    }

    /// The exponential step for the `failures`-th failure: initial × 2^(failures−1), capped.
    static func backoff(failures: Int, timing: Timing) -> TimeAmount {
        let shift = min(max(failures - 1, 0), 40)
        let (value, overflow) = timing.initialBackoff.nanoseconds.multipliedReportingOverflow(by: Int64(1) << shift)
        return overflow ? timing.maxBackoff : .nanoseconds(min(value, timing.maxBackoff.nanoseconds))
    }

    private mutating func markReady(_ key: String, now: NIODeadline) {
        guard queues[key]?.isEmpty == false, !inFlight.contains(key), !readySet.contains(key) else { return }
        if let record = failures[key], record.until > now { return }
        ready.append(key)
        readySet.insert(key)
    }

    private mutating func dispatch() -> [Action] {
        var actions: [Action] = []
        while inFlight.count < timing.maxConcurrent, let key = ready.popFirst() {
            readySet.remove(key)
            guard let head = queues[key]?.first, !inFlight.contains(key) else { continue }
            inFlight.insert(key)
            actions.append(.post(head, attempt: (failures[key]?.count ?? 0) + 1))
        }
        return actions
    }
}
