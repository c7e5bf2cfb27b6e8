import NIOCore

/// The app's backend, asked over HTTP whether a login, a subscribe or a publish may go ahead
/// (`rtm serve --auth-hook URL --auth-hook-secret S`). Logins are asked when `connect` is set;
/// subscribes and publishes in the namespaces that name the event (`ChannelNamespace.hooks`).
///
/// The server POSTs JSON (`{"event":"subscribe","appId":…,"userId":…,"channel":…}`, signed like
/// the webhooks: `X-RTM-Signature: sha256=<hex HMAC-SHA256(secret, body)>`) and the backend
/// answers 200 with `{"result":"allow"}` or `{"result":"deny","reason":"…"}`, optionally
/// rewriting (a login's grants, a publish's payload) and saying how long to keep the decision.
/// Anything else (no answer within `timeout`, a non-2xx status, a body that is not such JSON)
/// is a failure, decided by the namespace's `HookFailureMode`; after `breakerFailures` failures
/// in a row the server stops asking for `breakerOpenFor` (the circuit breaker) and applies the
/// failure mode at once, then lets one request through to see whether the backend is back.
public struct AuthorizationHookConfiguration: Sendable {
    /// The backend: `http://host[:port]/path` or `https://…` (TLS, system trust store).
    public var url: String
    /// The HMAC-SHA256 key of the `X-RTM-Signature` header.
    public var secret: String
    /// Logins are asked (`connect`), with this failure mode; nil: logins are not asked.
    public var connect: HookFailureMode?
    /// A request without a complete answer within this fails; the time it waited for a free
    /// slot (`maxConcurrentRequests`) counts. Default 1 s.
    public var timeout: TimeAmount = .seconds(1)
    /// Requests at the backend at once; more wait for a free slot, in order. Default 64.
    public var maxConcurrentRequests = 64
    /// Requests waiting for a slot at most; past it one gets its failure mode at once (the
    /// backend cannot keep up). Default 10,000.
    public var maxWaitingRequests = 10_000
    /// How long a login's or subscribe's allow or deny is reused for the same event, user and
    /// channel when the answer does not say (`cacheSeconds`). A publish's decision is reused
    /// (for that user's later publishes to the channel, whatever their payload) only for the
    /// `cacheSeconds` its answer gives; a payload rewrite never. 0: not kept. Default 10 s.
    public var cacheTTL: TimeAmount = .seconds(10)
    /// Decisions kept at most; past it the oldest go first. Default 100,000.
    public var maxCachedDecisions = 100_000
    /// Failures in a row that open the circuit breaker. Default 5.
    public var breakerFailures = 5
    /// How long the open breaker answers by the failure mode without asking. Default 10 s.
    public var breakerOpenFor: TimeAmount = .seconds(10)

    /// A hook with the defaults (logins not asked).
    public init(url: String, secret: String, connect: HookFailureMode? = nil) {
        self.url = url
        self.secret = secret
        self.connect = connect
    }
}

/// What a request the backend could not decide gets (no answer, an error, the breaker open).
public enum HookFailureMode: String, Sendable, Equatable {
    /// Refused (-10104 notPermitted, the reason saying the backend could not be asked). The
    /// default: a namespace worth asking about is one not to open by accident.
    case closed = "fail-closed"
    /// Allowed, as if the namespace had no hook (the failure is logged and counted).
    case open = "fail-open"
}

/// The events the backend may be asked about.
public enum HookEvent: String, Sendable, Equatable, Hashable, Codable, CaseIterable {
    /// A MESSAGE login (`AuthorizationHookConfiguration.connect`).
    case connect
    /// A subscribe to a message channel, or a STREAM connection's join.
    case subscribe
    /// A publish to a message channel.
    case publish
}
