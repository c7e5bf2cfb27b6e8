import NIOCore

/// A token bucket: `rate` tokens per second, holding at most `burst` (by default one second's
/// worth). A pure value: time is passed in.
struct RateLimiter: Sendable {
    private let rate: Double
    private let capacity: Double
    private var tokens: Double
    private var last: NIODeadline?

    /// `rate` ≤ 0 means unlimited. `start`: when the bucket was full (tokens accrue from then
    /// on); nil: from the first acquisition.
    init(ratePerSecond rate: Double, burst: Double? = nil, start: NIODeadline? = nil) {
        self.rate = rate
        self.capacity = max(burst ?? rate, 1)
        self.tokens = capacity
        self.last = start
    }

    /// Takes one token if available. `lateness`: how long what is read now may have waited
    /// unread because the server was busy; the bucket then holds that much more, so a stream
    /// that kept to the rate but was read late in one go is not taken for a burst (the long-run
    /// rate is unchanged: tokens still accrue at `rate`).
    mutating func tryAcquire(now: NIODeadline, lateness: TimeAmount = .zero) -> Bool {
        guard rate > 0 else { return true }
        if let last {
            let elapsed = Double((now - last).nanoseconds) / 1e9
            let held = capacity + rate * Double(lateness.nanoseconds) / 1e9
            tokens = min(held, tokens + elapsed * rate)
        }
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
