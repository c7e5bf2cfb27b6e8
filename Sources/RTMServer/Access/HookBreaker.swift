import NIOCore

/// The authorization hook's circuit breaker, as a value: time is passed in, and each call
/// says whether the breaker changed (the hook logs a change once).
///
/// Closed, it counts failures in a row; `threshold` of them open it. Open, every request is
/// answered by its failure mode without asking, until `openFor` has passed; then one request
/// goes through (half open): its success closes the breaker, its failure opens it again.
struct HookBreaker: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case closed(failures: Int)
        case open(until: NIODeadline)
        /// One trial request is under way.
        case halfOpen
    }

    /// A change worth a log line.
    enum Change: Sendable, Equatable { case opened, closed }

    let threshold: Int
    let openFor: TimeAmount
    private(set) var state: State = .closed(failures: 0)

    init(threshold: Int, openFor: TimeAmount) {
        self.threshold = max(1, threshold)
        self.openFor = openFor
    }

    /// Whether a request may go to the backend now (false: answer by the failure mode).
    mutating func admit(now: NIODeadline) -> Bool {
        switch state {
        case .closed: return true
        case .halfOpen: return false
        case .open(let until):
            guard now >= until else { return false }
            state = .halfOpen
            return true
        }
    }

    /// The backend answered.
    mutating func succeeded() -> Change? {
        defer { state = .closed(failures: 0) }
        if case .closed = state { return nil }
        return .closed
    }

    /// The backend failed (no answer, an error status, an unreadable answer).
    mutating func failed(now: NIODeadline) -> Change? {
        switch state {
        case .closed(let failures) where failures + 1 < threshold:
            state = .closed(failures: failures + 1)
            return nil
        case .closed:
            state = .open(until: now + openFor)
            return .opened
        case .halfOpen, .open:
            state = .open(until: now + openFor)
            return nil
        }
    }

    /// Whether requests are being answered without asking.
    var isOpen: Bool {
        if case .closed = state { return false }
        return true
    }
}
