import NIOCore
import RTMProtocol

/// Client configuration (SPEC §7). Every timer has the SPEC's default; `validate()` rejects
/// values outside the allowed ranges with an error naming the field and the range.
///
/// Tests may shrink timers below the production ranges by setting `allowTestTimings`.
public struct RTMClientConfig: Sendable {
    /// Application id.
    public var appId: String
    /// This client's user id (≤ 64 characters of the allowed set).
    public var userId: String
    /// Server endpoint, `ws://host:port` or `wss://host:port` (TLS; the path `/v1` is added when
    /// missing). Used when `endpoints` is empty.
    public var endpoint: String
    /// Several endpoints of one service (the nodes of a cluster): tried in a shuffled
    /// order, the next one after each failed attempt or lost connection, with the usual backoff
    /// between attempts; a client fails over to another node when one dies or drains (`goaway`).
    /// Empty (the default): `endpoint` alone.
    public var endpoints: [String] = []
    /// For `wss://`: a PEM file of the CA certificates to trust instead of the system trust
    /// store (a private CA, a self-signed server). nil (the default) = the system trust store.
    public var caFile: String?
    /// Seconds between pings (SPEC H-1), integer in [5, 1800]; default 5.
    public var heartbeatInterval: Double = 5
    /// Grace the server gives this client after losing it, seconds, in [5, 300]; default 15 (P-1).
    public var presenceTimeout: Double = 15
    /// Seconds without a reply to a ping before the link is declared lost (H-1); default 10.
    public var pongTimeout: Double = 10
    /// Seconds the initial login may take (C-1); default 12.
    public var loginTimeout: Double = 12
    /// Seconds a request may wait for its reply, queued time included; default 10.
    public var requestTimeout: Double = 10
    /// Seconds one connection attempt (TCP + upgrade + login reply) may take (T-1); default 10.
    public var connectTimeout: Double = 10
    /// Seconds after which an unrecovered link goes to failed (L-1): 0 = never, else [15, 3600].
    public var reconnectTimeout: Double = 0
    /// First reconnection backoff, seconds (R-1: 2).
    public var backoffInitial: Double = 2
    /// Backoff cap, seconds (R-1: 64).
    public var backoffMax: Double = 64
    /// How long the link stays `disconnected` before `suspended`, seconds (120).
    public var disconnectedWindow: Double = 120
    /// Retry period while `suspended`, seconds (30).
    public var suspendedRetryInterval: Double = 30
    /// An interruption shorter than this causes no classic state change, seconds (C-3: 4).
    public var interruptionThreshold: Double = 4
    /// No longer used: ``LinkStateEvent/isResumed`` is the server's answer (it still held the
    /// session), however long the link was away. Kept so that code setting it still compiles.
    @available(*, deprecated, message: "isResumed now follows the server's answer; this window has no effect")
    public var resumeWindow: Double = 120
    /// Deadline for a close handshake before the socket is dropped, seconds (T-2: 1).
    public var closeTimeout: Double = 1
    /// STREAM connection ping period, seconds (SPEC H-3: 0.5, fixed; only tests with
    /// `allowTestTimings` may change it).
    public var streamHeartbeatInterval: Double = 0.5
    /// A STREAM connection with no reply this long after a ping is lost, seconds (1).
    public var streamPongTimeout: Double = 1
    /// First delay before rejoining a lost stream channel (the first rejoin goes at once),
    /// seconds; doubles up to `backoffMax`, jittered.
    public var streamBackoffInitial: Double = 0.5
    /// A stream channel that cannot rejoin for this long goes to failed, seconds (§2.1: 20 min).
    public var streamRejoinWindow: Double = 1200
    /// `tokenWillExpire` fires this many seconds before the token expires (§2.13: 30).
    public var tokenWillExpireLead: Double = 30
    /// Seed for the backoff jitter; nil = random. Tests set it for determinism.
    public var jitterSeed: UInt64?
    /// Allow timers below the production ranges (tests only).
    public var allowTestTimings = false

    /// A configuration with every other field at its default.
    public init(appId: String, userId: String, endpoint: String = "ws://127.0.0.1:9600") {
        self.appId = appId
        self.userId = userId
        self.endpoint = endpoint
    }

    /// Checks every field; throws `RTMError` (`invalidParameter`, `invalidUserId`) naming the
    /// field and its allowed range.
    public func validate() throws(RTMError) {
        func fail(_ message: String) -> RTMError { RTMError(.invalidParameter, operation: "config", message) }
        if appId.isEmpty { throw fail("appId is empty") }
        if let problem = Limits().nameProblem(userId, kind: "userId") {
            throw RTMError(.invalidUserId, operation: "config", problem)
        }
        for endpoint in allEndpoints {
            guard endpoint.hasPrefix("ws://") || endpoint.hasPrefix("wss://") else {
                throw fail("endpoint must start with ws:// or wss://, got '\(endpoint)'")
            }
        }
        if !allowTestTimings {
            guard streamHeartbeatInterval == 0.5 else {
                throw fail("streamHeartbeatInterval is fixed at 0.5 s (SPEC H-3), got \(streamHeartbeatInterval)")
            }
            guard (5...1800).contains(heartbeatInterval), heartbeatInterval.rounded() == heartbeatInterval else {
                throw fail("heartbeatInterval must be an integer in [5, 1800] seconds, got \(heartbeatInterval)")
            }
            guard (5...300).contains(presenceTimeout), presenceTimeout.rounded() == presenceTimeout else {
                throw fail("presenceTimeout must be an integer in [5, 300] seconds, got \(presenceTimeout)")
            }
            guard reconnectTimeout == 0 || (15...3600).contains(reconnectTimeout) else {
                throw fail("reconnectTimeout must be 0 (never) or in [15, 3600] seconds, got \(reconnectTimeout)")
            }
        }
        let positive: [(String, Double)] = [
            ("pongTimeout", pongTimeout), ("loginTimeout", loginTimeout), ("requestTimeout", requestTimeout),
            ("connectTimeout", connectTimeout), ("backoffInitial", backoffInitial), ("backoffMax", backoffMax),
            ("disconnectedWindow", disconnectedWindow), ("suspendedRetryInterval", suspendedRetryInterval),
            ("closeTimeout", closeTimeout), ("heartbeatInterval", heartbeatInterval), ("presenceTimeout", presenceTimeout),
        ]
        for (name, value) in positive where !(value > 0) || !value.isFinite {
            throw fail("\(name) must be a positive number of seconds, got \(value)")
        }
        if backoffMax < backoffInitial {
            throw fail("backoffMax (\(backoffMax)) must be ≥ backoffInitial (\(backoffInitial))")
        }
        if reconnectTimeout < 0 { throw fail("reconnectTimeout must be 0 (never) or in [15, 3600] seconds, got \(reconnectTimeout)") }
    }
}

extension RTMClientConfig {
    /// The endpoints the client uses: `endpoints`, or `endpoint` alone when that is empty.
    public var allEndpoints: [String] { endpoints.isEmpty ? [endpoint] : endpoints }
}

extension TimeAmount {
    /// A time amount from fractional seconds.
    static func fractionalSeconds(_ value: Double) -> TimeAmount { .nanoseconds(Int64(value * 1e9)) }
}

/// What a backend hands a client to log in: the login token and, when the app limits what its
/// users may do, a capability token (PROTOCOL.md §8.1). See `RTMClient.login(credentialsProvider:)`.
public struct RTMCredentials: Sendable, Equatable {
    /// The login token ("006" or "007"; empty for an app without a certificate).
    public var token: String
    /// The capability token (a JWT), or nil: the session is not limited by one.
    public var capability: String?

    /// Credentials of a login token and an optional capability token.
    public init(token: String, capability: String? = nil) {
        self.token = token
        self.capability = capability
    }
}
