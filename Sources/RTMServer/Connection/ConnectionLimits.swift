import NIOConcurrencyHelpers
import RTMProtocol

/// The per-connection rates a reload may change (`RTMServer.reloadLimits`, `rtm serve` on
/// SIGHUP): connections take them when they open, and open ones are given new ones.
public struct ConnectionLimits: Sendable, Equatable {
    /// Publishes (channel and user messages) per second per connection; 0: unlimited.
    public var publishRatePerSecond: Double
    /// Error replies per second per connection after `errorReplyBurst`; 0: unlimited.
    public var errorReplyRatePerSecond: Double
    /// Error replies at once before `errorReplyRatePerSecond` applies.
    public var errorReplyBurst: Double

    /// Limits with these values.
    public init(publishRatePerSecond: Double, errorReplyRatePerSecond: Double, errorReplyBurst: Double) {
        self.publishRatePerSecond = publishRatePerSecond
        self.errorReplyRatePerSecond = errorReplyRatePerSecond
        self.errorReplyBurst = errorReplyBurst
    }

    /// The configuration's.
    init(_ configuration: ServerConfiguration) {
        self.init(publishRatePerSecond: configuration.publishRatePerSecond, errorReplyRatePerSecond: configuration.errorReplyRatePerSecond,
                  errorReplyBurst: configuration.errorReplyBurst)
    }

    /// What a publish over the rate is answered.
    var publishRateRefusal: RequestRefusal {
        RequestRefusal(code: .channelPublishMessageTooFrequent, reason: "more than \(Int(publishRatePerSecond)) messages per second")
    }

    /// Why these cannot be used, or nil.
    var problem: String? {
        guard publishRatePerSecond >= 0, errorReplyRatePerSecond >= 0, errorReplyBurst >= 0,
              publishRatePerSecond.isFinite, errorReplyRatePerSecond.isFinite, errorReplyBurst.isFinite else {
            return "publish rate, error reply rate and burst must be finite numbers ≥ 0"
        }
        return nil
    }
}

/// Connection limits with the refusal of a publish over their rate, built once per
/// configuration or reload and shared by every connection (a flood gets that refusal by the
/// thousand; no connection builds its own).
struct ConnectionRates: Sendable {
    let limits: ConnectionLimits
    let publishRefusal: RequestRefusal

    init(_ limits: ConnectionLimits) {
        self.limits = limits
        self.publishRefusal = limits.publishRateRefusal
    }
}
