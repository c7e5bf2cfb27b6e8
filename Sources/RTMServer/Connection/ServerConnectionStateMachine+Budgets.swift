import NIOCore
import NIOWebSocket

extension ServerConnectionStateMachine {
    /// A connection's request budgets (SPEC §8): publishes per second, and error replies
    /// before a flood of rejected requests closes the connection. Values; time is passed in.
    struct Budgets: Sendable {
        /// Publishes (channel and user messages) over `ConnectionLimits.publishRatePerSecond`
        /// are refused (`publishRefusal`).
        var publishes: RateLimiter
        /// Error replies the connection may still get.
        var errorReplies: RateLimiter
        /// The refusal of a publish over the rate (the rates' own, shared).
        let publishRefusal: RequestRefusal

        /// Full buckets at `start` for `rates`.
        init(_ rates: ConnectionRates, start: NIODeadline) {
            publishes = RateLimiter(ratePerSecond: rates.limits.publishRatePerSecond, start: start)
            errorReplies = RateLimiter(ratePerSecond: rates.limits.errorReplyRatePerSecond, burst: rates.limits.errorReplyBurst)
            publishRefusal = rates.publishRefusal
        }
    }

    /// Whether a publish read at `now` is within the publish rate (SPEC §8); `lateness`: how
    /// long it may have waited unread because the server was busy (`RateLimiter.tryAcquire`).
    mutating func admitPublish(now: NIODeadline, lateness: TimeAmount = .zero) -> Bool {
        budgets.publishes.tryAcquire(now: now, lateness: lateness)
    }

    /// An error reply with `code` is about to be sent at `now`. Nil while the error budget
    /// lasts: send it. Once spent, the peer ignores its errors (a flood): the reply is not
    /// sent and the connection closes with 1008 "too many rejected requests", which costs it
    /// nothing legitimate and frees its neighbours; the action returned performs that.
    mutating func errorReply(code: Int, now: NIODeadline) -> Action? {
        lastErrorCode = code
        guard !budgets.errorReplies.tryAcquire(now: now) else { return nil }
        return close(code: .policyViolation, reason: Self.floodReason, now: now)
    }

    /// A login is being tried: a refusal it gets is its own (`lastErrorCode`).
    mutating func loginAttempted() {
        lastErrorCode = nil
    }

    /// New rates (a reload): new, full buckets from `now`.
    mutating func reload(_ rates: ConnectionRates, now: NIODeadline) {
        budgets = Budgets(rates, start: now)
    }

    /// The close reason of a connection that kept sending rejected requests.
    static let floodReason = "too many rejected requests"
}
