import NIOCore

/// Where and how the server POSTs its events (`rtm serve --webhook-url --webhook-secret`).
public struct WebhookConfiguration: Sendable {
    /// The receiver: `http://host[:port]/path` or `https://…` (TLS, system trust store).
    public var url: String
    /// The HMAC-SHA256 key: each POST carries `X-RTM-Signature: sha256=<hex of
    /// HMAC-SHA256(secret, body)>`.
    public var secret: String
    /// Events kept on disk waiting for delivery; past it the oldest are dropped, logged and
    /// counted (`RTMServer.webhookStats`). Default 100,000.
    public var maxQueuedEvents = 100_000
    /// First retry delay after a failed POST; doubles per failure of the same event (with
    /// jitter), up to `maxBackoff`. Default 1 s.
    public var initialBackoff: TimeAmount = .seconds(1)
    /// Longest retry delay. Default 5 min.
    public var maxBackoff: TimeAmount = .minutes(5)
    /// An event still undelivered this long after its first attempt is dropped (logged and
    /// counted), so one user whose events the receiver always refuses cannot hold its queue
    /// for ever. Default 24 h.
    public var maxRetryDuration: TimeAmount = .hours(24)
    /// A POST without a complete response within this fails (and is retried). Default 10 s.
    public var requestTimeout: TimeAmount = .seconds(10)
    /// POSTs in flight at once (each for a different user). Default 16.
    public var maxConcurrentDeliveries = 16

    /// A configuration with the defaults.
    public init(url: String, secret: String) {
        self.url = url
        self.secret = secret
    }
}

/// Webhook delivery counters.
public struct WebhookStats: Sendable, Equatable, Codable {
    /// Events delivered (a 2xx answer).
    public var delivered = 0
    /// Failed POSTs (each retried later).
    public var failedAttempts = 0
    /// Events dropped because the queue was full (oldest first). An event whose POST was
    /// already under way counts only once that POST fails (it may still be delivered).
    public var droppedQueueFull = 0
    /// Events dropped after `maxRetryDuration` of failures.
    public var droppedExpired = 0
    /// Events waiting (on disk), in flight included.
    public var queued = 0
    /// How long the oldest waiting event has waited, in seconds (nil: none waits).
    public var oldestQueuedSeconds: Double?
    /// False from a failed POST until the next delivered one: the receiver is unreachable or
    /// answers with an error.
    public var receiverUp = true
    /// Why the last POST failed (an HTTP status, or the connection's error), while
    /// `receiverUp` is false.
    public var lastFailure: String?
}
