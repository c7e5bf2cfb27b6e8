import DequeModule
import NIOCore

/// How many questions the authorization hook has at the backend at once, and the ones waiting
/// for a free slot, as a value (time passed in): a reconnection storm asks the backend at the
/// pace it can answer instead of opening thousands of connections to it at once.
struct HookSlots<Waiter: Sendable>: Sendable {
    /// Questions at the backend at once.
    let capacity: Int
    /// Questions waiting at most; past it a new one gets its failure mode at once.
    let maxWaiting: Int
    private(set) var inFlight = 0
    private var waiting: Deque<(waiter: Waiter, since: NIODeadline)> = []

    init(capacity: Int, maxWaiting: Int) {
        self.capacity = max(1, capacity)
        self.maxWaiting = max(0, maxWaiting)
    }

    enum Admission: Equatable { case go, wait, full }

    /// A new question: it goes now (a slot is taken), waits, or is refused (the queue is full).
    mutating func admit(_ waiter: Waiter, now: NIODeadline) -> Admission {
        if inFlight < capacity, waiting.isEmpty {
            inFlight += 1
            return .go
        }
        guard waiting.count < maxWaiting else { return .full }
        waiting.append((waiter, now))
        return .wait
    }

    /// A question is answered (or failed): its slot goes to the oldest waiter that has waited
    /// less than `maxWait` (`start`, with how long it waited); the ones that waited longer are
    /// given up (`expired`).
    mutating func done(now: NIODeadline, maxWait: TimeAmount) -> (start: (Waiter, waited: TimeAmount)?, expired: [Waiter]) {
        inFlight -= 1
        var expired: [Waiter] = []
        while let first = waiting.popFirst() {
            let waited = now - first.since
            if waited >= maxWait {
                expired.append(first.waiter)
                continue
            }
            inFlight += 1
            return ((first.waiter, waited), expired)
        }
        return (nil, expired)
    }

    /// Questions waiting for a slot.
    var waitingCount: Int { waiting.count }
}
