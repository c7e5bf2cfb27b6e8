import NIOCore

/// A token bucket: `rate` tokens per second, holding at most `burst` (by default one second's
/// worth). A pure value: time is passed in.
struct RateLimiter: Sendable {
    private let rate: Double
    private let capacity: Double
    private var tokens: Double
    private var last: NIODeadline?

    /// `rate` ≤ 0 means unlimited.
    init(ratePerSecond rate: Double, burst: Double? = nil) {
        self.rate = rate
        self.capacity = max(burst ?? rate, 1)
        self.tokens = capacity
    }

    /// Takes one token if available.
    mutating func tryAcquire(now: NIODeadline) -> Bool {
        guard rate > 0 else { return true }
        if let last {
            let elapsed = Double((now - last).nanoseconds) / 1e9
            tokens = min(capacity, tokens + elapsed * rate)
        }
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
