import NIOConcurrencyHelpers
import NIOCore

/// Keeps a warning that can come by the thousand (a flood's connections closed one after the
/// other, slow consumers cut under load) to one line per `interval`, saying how many were not
/// logged since; the metrics count every one. Thread-safe: connections on every event loop
/// share one.
final class LogThrottle: Sendable {
    private let interval: TimeAmount
    private let state = NIOLockedValueBox<(last: NIODeadline?, suppressed: Int)>((nil, 0))

    /// At most one line per `interval`.
    init(interval: TimeAmount = .seconds(10)) {
        self.interval = interval
    }

    /// Whether to log the event happening at `now`; if so, how many were held back since the last line.
    func admit(now: NIODeadline) -> (log: Bool, suppressed: Int) {
        state.withLockedValue { state in
            if let last = state.last, now - last < interval {
                state.suppressed += 1
                return (false, 0)
            }
            defer { state = (now, 0) }
            return (true, state.suppressed)
        }
    }
}
