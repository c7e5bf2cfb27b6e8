import Crypto
import Foundation
import Logging
import NIOCore

/// The one owner of webhook delivery: events come in from the hub (`emit`, any thread), are
/// written to the on-disk queue, and POSTed as `WebhookScheduler` decides; a 2xx answer removes
/// an event from the queue. Everything runs on one serial queue.
final class WebhookDispatcher: @unchecked Sendable {
    private let configuration: WebhookConfiguration
    private let group: any EventLoopGroup
    private let store: WebhookQueueStore
    private let logger: Logger
    private let queue = DispatchQueue(label: "rtm.webhooks")
    /// This run's prefix of event ids (events queued by an earlier run keep theirs).
    private let runId = String(UInt64.random(in: 1...UInt64.max), radix: 36)

    // Confined to `queue`.
    /// Where events go and how they are signed (`retarget` may change them).
    private var client: WebhookHTTPClient
    private var key: SymmetricKey
    private var url: String
    private var scheduler: WebhookScheduler
    private var unwritten: [WebhookEvent] = []
    private var flushScheduled = false
    private var nextSequence: UInt64 = 1
    private var stopped = false
    private var counters = WebhookStats()
    /// `counters.failedAttempts` when the receiver was last found failing.
    private var failedAttemptsWhenDown = 0
    private var random = SystemRandomNumberGenerator()
    /// The outboxes (`WebhookOutbox`: the hub's, the stream channels'), taken on `wake`.
    private var sources: [@Sendable () -> [WebhookEvent]] = []

    /// Opens the queue (`webhooks.sqlite` under `dataDirectory`) and posts what an earlier run
    /// left in it.
    init(configuration: WebhookConfiguration, dataDirectory: String?, fullSync: Bool, group: any EventLoopGroup, logger: Logger) throws {
        guard let target = WebhookHTTPClient.Target(configuration.url) else {
            throw WebhookConfigurationError(reason: "webhook url '\(configuration.url)' is not an absolute http:// or https:// URL")
        }
        guard !configuration.secret.isEmpty else { throw WebhookConfigurationError(reason: "webhook secret is empty") }
        guard configuration.maxQueuedEvents > 0, configuration.maxConcurrentDeliveries > 0 else {
            throw WebhookConfigurationError(reason: "webhook maxQueuedEvents and maxConcurrentDeliveries must be ≥ 1")
        }
        guard configuration.initialBackoff > .zero, configuration.maxBackoff >= configuration.initialBackoff,
              configuration.requestTimeout > .zero, configuration.maxRetryDuration > .zero else {
            throw WebhookConfigurationError(reason: "webhook initialBackoff, requestTimeout and maxRetryDuration must be > 0 and maxBackoff ≥ initialBackoff")
        }
        self.configuration = configuration
        self.logger = logger
        self.key = SymmetricKey(data: Data(configuration.secret.utf8))
        self.client = try WebhookHTTPClient(target: target, timeout: configuration.requestTimeout, group: group)
        self.url = configuration.url
        self.group = group
        self.store = try WebhookQueueStore(path: dataDirectory.map { ($0 as NSString).appendingPathComponent("webhooks.sqlite") },
                                           maxEvents: configuration.maxQueuedEvents, fullSync: fullSync)
        self.scheduler = WebhookScheduler(timing: .init(
            initialBackoff: configuration.initialBackoff, maxBackoff: configuration.maxBackoff,
            maxRetryDuration: configuration.maxRetryDuration, maxConcurrent: configuration.maxConcurrentDeliveries))
        let leftOver = try store.all()
        if !leftOver.isEmpty { logger.info("webhook events queued by an earlier run", metadata: ["count": "\(leftOver.count)"]) }
        // Sessions an earlier run left without their end (it was killed, or its machine went
        // down): they end now, after what that run had queued.
        let unended = Self.endEvents(of: try store.presence(), reason: "serverRestart")
        if !unended.isEmpty { logger.info("sessions of an earlier run end with their webhook events", metadata: ["events": "\(unended.count)"]) }
        queue.async {
            self.run(self.scheduler.enqueue(leftOver, now: .now()))
            self.accept(unended)
        }
    }

    /// Queues an event. Calls for one user must come in that user's order.
    func emit(_ type: WebhookEvent.EventType, user: UserKey, channel: String? = nil, channelType: String? = nil,
              reason: String? = nil, count: Int? = nil) {
        let event = WebhookEvent(eventId: "", eventType: type, appId: user.appId, userId: user.userId, ts: Hub.wallMillis,
                                 channelName: channel, channelType: channelType, reason: reason, count: count)
        queue.async { self.accept([event]) }
    }

    /// One more place where events wait in the order they happened (a `WebhookOutbox`, taken
    /// under its owner's lock: the hub's session and channel events, the stream channels').
    /// Each source's order is kept. Added before the server serves.
    func addSource(_ take: @escaping @Sendable () -> [WebhookEvent]) {
        queue.sync { sources.append(take) }
    }

    /// A source queued events: they are taken on this queue, in order, and written.
    func wake() {
        queue.async { self.takeSources() }
    }

    private func takeSources() {
        for source in sources { accept(source()) }
    }

    /// Delivery counters and the receiver's state.
    var stats: WebhookStats {
        queue.sync { currentStats() }
    }

    /// The same, handed to `done` from the dispatcher's queue (the scrape: no event loop waits).
    func stats(_ done: @escaping @Sendable (WebhookStats) -> Void) {
        queue.async { done(self.currentStats()) }
    }

    private func currentStats() -> WebhookStats {
        var stats = counters
        stats.queued = store.count
        if stats.queued > 0, let oldest = try? store.oldestEventMillis() {
            stats.oldestQueuedSeconds = Double(max(0, Hub.wallMillis - oldest)) / 1000
        }
        return stats
    }

    /// Writes what was emitted to disk and stops posting (shutdown). What is queued stays on
    /// disk for the next run.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.takeSources()
                self.flush()
                // The sessions still open end with this run: their leave and offline events
                // are on disk, posted by the next run if not now.
                do {
                    self.accept(Self.endEvents(of: try self.store.presence(), reason: "serverShutdown"))
                    self.flush()
                } catch {
                    self.logger.error("webhook presence unreadable: open sessions not ended", metadata: ["error": "\(error)"])
                }
                self.stopped = true
                continuation.resume()
            }
        }
    }

    /// The leave and offline events that end these sessions, with `reason`.
    static func endEvents(of sessions: [(user: UserKey, channels: [(name: String, type: String)])], reason: String) -> [WebhookEvent] {
        let now = Hub.wallMillis
        return sessions.flatMap { WebhookEvent.sessionEnd($0.user, channels: $0.channels, reason: reason, ts: now) }
    }

    // MARK: on the queue

    private func accept(_ events: [WebhookEvent]) {
        guard !stopped, !events.isEmpty else { return }
        unwritten += events
        guard !flushScheduled else { return }
        flushScheduled = true
        queue.async { self.flush() }
    }

    private func flush() {
        flushScheduled = false
        guard !unwritten.isEmpty else { return }
        var rows: [(key: String, eventId: String, body: Data)] = []
        let written = unwritten
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for var event in unwritten {
            event.eventId = "\(runId)-\(nextSequence)"
            nextSequence += 1
            guard let body = try? encoder.encode(event) else { continue }
            rows.append((event.orderingKey, event.eventId, body))
        }
        unwritten.removeAll()
        do {
            let (items, dropped) = try store.append(rows, presence: written)
            let gone = Set(dropped)
            if !gone.isEmpty {
                // An event whose POST is in flight is counted when that POST fails (it may
                // still be delivered); events of this very batch past the bound never start.
                let inFlight = scheduler.evict(gone)
                counters.droppedQueueFull += gone.count - inFlight
                logger.warning("webhook queue full: dropped the oldest events",
                               metadata: ["dropped": "\(gone.count)", "max": "\(configuration.maxQueuedEvents)"])
            }
            run(scheduler.enqueue(items.filter { !gone.contains($0.id) }, now: .now()))
        } catch {
            logger.error("webhook queue write failed; events lost", metadata: ["count": "\(rows.count)", "error": "\(error)"])
        }
    }

    private func run(_ actions: [WebhookScheduler.Action]) {
        for action in actions {
            switch action {
            case .post(let item, let attempt):
                post(item, attempt: attempt)
            case .wake(let deadline):
                let delay = max(0, (deadline - .now()).nanoseconds)
                queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay))) {
                    guard !self.stopped else { return }
                    self.run(self.scheduler.wake(now: .now()))
                }
            case .delivered(let item):
                counters.delivered += 1
                remove(item)
            case .droppedInFlight:
                counters.droppedQueueFull += 1
            case .expired(let item):
                counters.droppedExpired += 1
                logger.warning("webhook event dropped after retrying for maxRetryDuration",
                               metadata: ["eventId": "\(item.eventId)", "key": "\(item.key)"])
                remove(item)
            }
        }
    }

    private func remove(_ item: WebhookScheduler.Item) {
        do { try store.delete([item.id]) } catch {
            logger.error("webhook queue delete failed (the event may be sent again)", metadata: ["error": "\(error)"])
        }
    }

    private func post(_ item: WebhookScheduler.Item, attempt: Int) {
        guard !stopped else { return }
        let signature = Self.signature(of: item.body, key: key)
        let headers = [("X-RTM-Signature", "sha256=\(signature)"), ("X-RTM-Event-Id", item.eventId), ("X-RTM-Attempt", "\(attempt)")]
        client.post(body: item.body, headers: headers).map(\.status).whenComplete { result in
            self.queue.async {
                guard !self.stopped else { return }
                switch result {
                case .success(let status) where (200..<300).contains(status.code):
                    self.receiverAnswered()
                    self.run(self.scheduler.delivered(item, now: .now()))
                case .success(let status):
                    self.failed(item, attempt: attempt, reason: "HTTP \(status.code)")
                case .failure(let error):
                    self.failed(item, attempt: attempt, reason: "\(error)")
                }
            }
        }
    }

    /// A delivery succeeded: a failing receiver is back (logged once per change).
    private func receiverAnswered() {
        guard !counters.receiverUp else { return }
        counters.receiverUp = true
        counters.lastFailure = nil
        logger.notice("webhook receiver answers again: queued events are being delivered",
                      metadata: ["failedAttempts": "\(counters.failedAttempts - failedAttemptsWhenDown)"])
    }

    private func failed(_ item: WebhookScheduler.Item, attempt: Int, reason: String) {
        counters.failedAttempts += 1
        counters.lastFailure = reason
        if counters.receiverUp {
            // Once per change, at the default level: events stay queued and are retried.
            counters.receiverUp = false
            failedAttemptsWhenDown = counters.failedAttempts - 1
            logger.warning("webhook receiver failing: events stay queued and are retried with backoff",
                           metadata: ["url": "\(url)", "reason": "\(reason)"])
        }
        logger.debug("webhook POST failed; will retry", metadata: ["eventId": "\(item.eventId)", "attempt": "\(attempt)", "reason": "\(reason)"])
        run(scheduler.failed(item, now: .now(), jitter: Double.random(in: 0..<1, using: &random)))
    }

    /// Events go to `url`, signed with `secret`, from now on (those queued too). Throws,
    /// changing nothing, when either cannot be used.
    func retarget(url: String, secret: String) throws(ServerConfigurationError) {
        guard let target = WebhookHTTPClient.Target(url) else {
            throw ServerConfigurationError("webhook url '\(url)' is not an absolute http:// or https:// URL")
        }
        guard !secret.isEmpty else { throw ServerConfigurationError("webhook secret is empty") }
        let client: WebhookHTTPClient
        do {
            client = try WebhookHTTPClient(target: target, timeout: configuration.requestTimeout, group: group)
        } catch {
            throw ServerConfigurationError("webhook TLS: \(error)")
        }
        let key = SymmetricKey(data: Data(secret.utf8))
        queue.sync {
            self.client = client
            self.key = key
            self.url = url
        }
    }

    /// Lowercase hex of HMAC-SHA256(key, body): the `X-RTM-Signature` value after `sha256=`.
    static func signature(of body: Data, key: SymmetricKey) -> String {
        HMAC<SHA256>.authenticationCode(for: body, using: key).map { String(format: "%02x", $0) }.joined()
    }
}

/// A webhook configuration the server cannot use.
public struct WebhookConfigurationError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, naming the field.
    public let reason: String
    /// The reason.
    public var description: String { reason }
}
