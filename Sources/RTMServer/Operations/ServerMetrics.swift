import Foundation
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import Prometheus
import RTMProtocol

/// The server's metrics, through swift-metrics with the Prometheus backend: one
/// registry per server (several servers may share a process, as in the tests, so nothing is
/// bootstrapped globally), rendered by `GET /metrics` in the Prometheus text format. Names carry
/// the `rtm_` prefix and base units (seconds, bytes); counters end in `_total`; every label has
/// a small fixed set of values. docs/operations.md ("Metrics") lists them all.
///
/// The hot path never touches these: the event loops count traffic in plain integers
/// (`LoopStats`), folded in here when `/metrics` is scraped (`fold`). Rare events (logins,
/// disconnects, slow consumers, replays) and per-batch timings go straight to their metric.
final class ServerMetrics: Sendable {
    /// The Prometheus registry (what `/metrics` renders).
    let registry: PrometheusCollectorRegistry
    /// Makes the metrics of other parts (`ClusterStatus`), in this registry.
    let factory: PrometheusMetricsFactory

    private let channelIn: Metrics.Counter
    private let channelOut: Metrics.Counter
    private let streamIn: Metrics.Counter
    private let streamOut: Metrics.Counter
    private let userIn: Metrics.Counter
    private let userOut: Metrics.Counter
    private let deliveries: Metrics.Counter
    private let bytesIn: Metrics.Counter
    private let bytesOut: Metrics.Counter
    private let slowConsumers: Metrics.Counter
    private let replays: Metrics.Counter
    private let replayedMessages: Metrics.Counter
    private let gaps: Metrics.Counter
    private let goAways: Metrics.Counter
    private let storeCommit: Metrics.Timer
    private let storeCommitted: Metrics.Counter
    /// Request duration per request type (the known types; anything else is "other").
    private let requestDurations: [String: Metrics.Timer]
    private let otherRequest: Metrics.Timer
    private let gauges: [Gauge: Metrics.Gauge]
    /// When this server was made, in seconds since the Unix epoch (the process's start time
    /// where `/proc` cannot say).
    private let startTime = Date().timeIntervalSince1970
    /// The webhook totals of the last scrape (`fold(_:)` counts what changed since).
    private let lastWebhooks = NIOLockedValueBox(WebhookStats())
    private let refusalTotals = NIOLockedValueBox([RefusalKey: Int]())
    /// The authorization hook's counters of the last scrape.
    private let lastHook = NIOLockedValueBox(AuthorizationHook.Stats())

    /// Gauges set from the server's state at each scrape.
    enum Gauge: CaseIterable {
        case messageConnections, streamConnections, webSocketConnections, peakMessageConnections, sessions
        case mailboxQueue, storageQueue, draining

        var label: (String, [(String, String)]) {
            switch self {
            case .messageConnections: ("rtm_connections", [("kind", "message")])
            case .streamConnections: ("rtm_connections", [("kind", "stream")])
            case .webSocketConnections: ("rtm_websocket_connections", [])
            case .peakMessageConnections: ("rtm_pcu", [])
            case .sessions: ("rtm_sessions", [])
            case .mailboxQueue: ("rtm_queue_depth", [("queue", "user_message_store")])
            case .storageQueue: ("rtm_queue_depth", [("queue", "storage")])
            case .draining: ("rtm_draining", [])
            }
        }
    }

    /// Request types whose duration is recorded under their own label.
    static let requestTypes: [FrameType] = [
        .login, .ping, .subscribe, .unsubscribe, .publish, .sendUser, .renewToken, .setState, .removeState, .getState,
        .whoNow, .whereNow, .ackUser, .logout, .getMessages, .setMetadata, .replaceMetadata, .updateMetadata,
        .removeMetadata, .getMetadata, .subscribeMetadata, .unsubscribeMetadata, .setLock, .acquireLock, .releaseLock,
        .revokeLock, .removeLock, .getLocks, .join, .leave, .joinTopic, .leaveTopic, .publishTopic, .subscribeTopic,
        .unsubscribeTopic,
    ]

    init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Requests take microseconds; a store commit (SQLite, WAL) a fraction of a millisecond to
        // tens of milliseconds.
        let fast: [Duration] = [.microseconds(10), .microseconds(25), .microseconds(50), .microseconds(100), .microseconds(250),
                                .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10),
                                .milliseconds(25), .milliseconds(100), .seconds(1)]
        factory.durationHistogramBuckets["rtm_request_duration_seconds"] = fast
        factory.durationHistogramBuckets["rtm_user_message_store_commit_seconds"] =
            [.microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
             .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1)]
        factory.durationHistogramBuckets["rtm_cluster_publish_commit_seconds"] =
            [.microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10),
             .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1), .seconds(5)]
        self.registry = registry
        self.factory = factory
        func counter(_ label: String, _ dimensions: [(String, String)] = []) -> Metrics.Counter {
            Metrics.Counter(label: label, dimensions: dimensions, factory: factory)
        }
        channelIn = counter("rtm_messages_received_total", [("kind", "channel")])
        channelOut = counter("rtm_messages_sent_total", [("kind", "channel")])
        streamIn = counter("rtm_messages_received_total", [("kind", "stream")])
        streamOut = counter("rtm_messages_sent_total", [("kind", "stream")])
        userIn = counter("rtm_messages_received_total", [("kind", "user")])
        userOut = counter("rtm_messages_sent_total", [("kind", "user")])
        deliveries = counter("rtm_deliveries_total")
        bytesIn = counter("rtm_received_bytes_total")
        bytesOut = counter("rtm_sent_bytes_total")
        slowConsumers = counter("rtm_slow_consumers_dropped_total")
        replays = counter("rtm_replays_total")
        replayedMessages = counter("rtm_replayed_frames_total")
        gaps = counter("rtm_gaps_total")
        goAways = counter("rtm_goaways_sent_total")
        storeCommitted = counter("rtm_user_message_store_commits_total")
        storeCommit = Metrics.Timer(label: "rtm_user_message_store_commit_seconds", factory: factory)
        var durations: [String: Metrics.Timer] = [:]
        for type in Self.requestTypes {
            durations[type.rawValue] = Metrics.Timer(label: "rtm_request_duration_seconds", dimensions: [("type", type.rawValue)], factory: factory)
        }
        requestDurations = durations
        otherRequest = Metrics.Timer(label: "rtm_request_duration_seconds", dimensions: [("type", "other")], factory: factory)
        var gauges: [Gauge: Metrics.Gauge] = [:]
        for gauge in Gauge.allCases {
            let (label, dimensions) = gauge.label
            gauges[gauge] = Metrics.Gauge(label: label, dimensions: dimensions, factory: factory)
        }
        self.gauges = gauges
        // Every labelled series exists from the start (a scraper sees 0, not a missing series).
        for result in ["ok", "resumed", "rejected"] { _ = counter("rtm_logins_total", [("result", result)]) }
    }

    // MARK: folded at scrape

    /// Adds what the event loops counted since the last scrape.
    func fold(_ stats: LoopStats) {
        channelIn.increment(by: Int64(stats.channelMessagesIn))
        channelOut.increment(by: Int64(stats.channelMessagesOut))
        streamIn.increment(by: Int64(stats.streamMessagesIn))
        streamOut.increment(by: Int64(stats.streamMessagesOut))
        deliveries.increment(by: Int64(stats.deliveries))
        bytesIn.increment(by: Int64(stats.bytesIn))
        bytesOut.increment(by: Int64(stats.bytesOut))
        for (key, count) in stats.refused { refused(RTMErrorCode(rawValue: key.code), operation: key.operation, count: count) }
    }

    /// Webhook delivery, from the dispatcher's totals: each counter advances by what changed
    /// since the last scrape.
    func fold(_ webhooks: WebhookStats) {
        let previous = lastWebhooks.withLockedValue { last in
            defer { last = webhooks }
            return last
        }
        func advance(_ label: String, _ dimensions: [(String, String)] = [], _ now: Int, _ before: Int) {
            Metrics.Counter(label: label, dimensions: dimensions, factory: factory).increment(by: Int64(max(0, now - before)))
        }
        advance("rtm_webhook_events_delivered_total", [], webhooks.delivered, previous.delivered)
        advance("rtm_webhook_delivery_failures_total", [], webhooks.failedAttempts, previous.failedAttempts)
        advance("rtm_webhook_events_dropped_total", [("reason", "queue_full")], webhooks.droppedQueueFull, previous.droppedQueueFull)
        advance("rtm_webhook_events_dropped_total", [("reason", "expired")], webhooks.droppedExpired, previous.droppedExpired)
        Metrics.Gauge(label: "rtm_queue_depth", dimensions: [("queue", "webhooks")], factory: factory).record(webhooks.queued)
        Metrics.Gauge(label: "rtm_webhook_oldest_queued_seconds", factory: factory).record(webhooks.oldestQueuedSeconds ?? 0)
        Metrics.Gauge(label: "rtm_webhook_receiver_up", factory: factory).record(webhooks.receiverUp ? 1 : 0)
    }

    /// The authorization hook's questions by event and outcome, and its breaker, from its
    /// totals: each counter advances by what changed since the last scrape.
    func fold(_ hook: AuthorizationHook.Stats) {
        let previous = lastHook.withLockedValue { last in
            defer { last = hook }
            return last
        }
        for event in HookEvent.allCases {
            for outcome in AuthorizationHook.Stats.Outcome.allCases {
                Metrics.Counter(label: "rtm_auth_hook_requests_total", dimensions: [("event", event.rawValue), ("outcome", outcome.rawValue)],
                                factory: factory)
                    .increment(by: Int64(max(0, hook.count(event, outcome) - previous.count(event, outcome))))
            }
        }
        Metrics.Gauge(label: "rtm_auth_hook_breaker_open", factory: factory).record(hook.breakerOpen ? 1 : 0)
    }

    /// Sets a gauge.
    func set(_ gauge: Gauge, _ value: Int) {
        gauges[gauge]?.record(value)
    }

    /// The Prometheus text exposition of every metric.
    func render() -> String {
        MetricHelp.annotate(registry.emitToString()) + ProcessMetrics.read(fallbackStart: startTime).render(version: RTMServer.version)
    }

    // MARK: events

    /// A login's outcome: `ok`, `resumed`, or `rejected` with the error code's name as `code`.
    func login(resumed: Bool) {
        Metrics.Counter(label: "rtm_logins_total", dimensions: [("result", resumed ? "resumed" : "ok")], factory: factory).increment()
    }

    /// A refused login (`code`: the error code of the reply; its name is the label).
    func loginRejected(_ code: RTMErrorCode) {
        Metrics.Counter(label: "rtm_logins_total", dimensions: [("result", "rejected")], factory: factory).increment()
        Metrics.Counter(label: "rtm_login_rejections_total", dimensions: [("code", code.description)], factory: factory).increment()
    }

    /// Requests of `operation` (the request's type) refused with `code` (its name is the
    /// label): counted by the event loops and folded in at scrape, or here at once on the
    /// rarer routes (store and lock failures). The totals are also kept for the admin API's
    /// `/v1/info` (`refusals`).
    func refused(_ code: RTMErrorCode, operation: FrameType, count: Int = 1) {
        Metrics.Counter(label: "rtm_requests_refused_total", dimensions: [("operation", operation.rawValue), ("code", code.description)],
                        factory: factory).increment(by: Int64(count))
        refusalTotals.withLockedValue { $0[RefusalKey(operation: operation, code: code.rawValue), default: 0] += count }
    }

    /// Every refusal so far by operation and error code (the admin API's `/v1/info`).
    var refusals: [RefusalKey: Int] { refusalTotals.withLockedValue { $0 } }

    /// A WebSocket connection ended (`reason`: one of `DisconnectReason`'s values).
    func disconnected(_ reason: DisconnectReason) {
        Metrics.Counter(label: "rtm_disconnects_total", dimensions: [("reason", reason.rawValue)], factory: factory).increment()
    }

    /// A consumer that could not keep up was cut off.
    func slowConsumerDropped() { slowConsumers.increment() }

    /// A replay after a resume or a subscription with a position (M-2): frames re-sent, and
    /// whether a gap had to be reported.
    func replayed(frames: Int, gap: Bool) {
        replays.increment()
        replayedMessages.increment(by: Int64(frames))
        if gap { gaps.increment() }
    }

    /// `goaway` frames sent (drain or shutdown).
    func sentGoAways(_ count: Int) { goAways.increment(by: Int64(count)) }

    /// User messages accepted for storage (`sendUser`).
    func userMessagesIn(_ count: Int) { userIn.increment(by: Int64(count)) }

    /// User messages handed to a receiver's connection.
    func userMessagesOut(_ count: Int) { userOut.increment(by: Int64(count)) }

    /// One user-message store transaction took `nanoseconds`.
    func storeCommitted(nanoseconds: Int64) {
        storeCommit.recordNanoseconds(nanoseconds)
        storeCommitted.increment()
    }

    /// The time a request of `type` took on its event loop.
    func request(_ type: FrameType, nanoseconds: Int64) {
        (requestDurations[type.rawValue] ?? otherRequest).recordNanoseconds(nanoseconds)
    }
}

/// Why a WebSocket connection ended: the `reason` label of `rtm_disconnects_total`.
enum DisconnectReason: String, Sendable, CaseIterable {
    /// The server sent a close frame 1000 (logout, leave, kick, replaced by a resume).
    case normal = "server_close_1000"
    /// The server sent `goaway` and close 1001 (drain, shutdown).
    case goingAway = "server_close_1001"
    /// The server closed for a policy reason, 1008 (token expiry, too many rejected requests).
    case policy = "server_close_1008"
    /// The server sent another close code.
    case otherServerClose = "server_close_other"
    /// The WebSocket layer answered a protocol violation (1002, 1007, 1009).
    case protocolViolation = "protocol_violation"
    /// The client sent a close frame.
    case clientClose = "client_close"
    /// A deadline passed (heartbeat, stream idle, login, close).
    case timeout
    /// The outbound backlog passed `maxOutboundBytes`.
    case slowConsumer = "slow_consumer"
    /// The socket closed or failed without a close frame.
    case connectionLost = "connection_lost"

    /// The reason for a close frame the server sends.
    init(serverCloseCode code: Int) {
        switch code {
        case 1000: self = .normal
        case 1001: self = .goingAway
        case 1008: self = .policy
        default: self = .otherServerClose
        }
    }
}
