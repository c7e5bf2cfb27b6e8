import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Asks the app's backend about logins, subscribes and publishes
/// (`AuthorizationHookConfiguration`): one signed POST per question not answered from the
/// decision cache, bounded by the timeout, behind a circuit breaker. The breaker, the cache
/// and the counters are one value behind one lock; the POST and the log lines happen outside it.
final class AuthorizationHook: Sendable {
    /// Counters by event and outcome, and the breaker's state (folded into `/metrics` at scrape).
    struct Stats: Sendable, Equatable {
        enum Outcome: String, Sendable, CaseIterable {
            /// The backend allowed (a fresh answer).
            case allow
            /// The backend denied (a fresh answer).
            case deny
            /// Answered from the decision cache.
            case cached
            /// No usable answer (timeout, connection error, non-2xx status, unreadable body).
            case failed
            /// Not asked: the breaker was open.
            case breakerOpen = "breaker_open"
        }

        var counts: [HookEvent: [Outcome: Int]] = [:]
        var breakerOpen = false

        func count(_ event: HookEvent, _ outcome: Outcome) -> Int { counts[event]?[outcome] ?? 0 }
    }

    /// A question waiting for a slot.
    private struct Waiter {
        let question: HookQuestion
        let failure: HookFailureMode
        let promise: EventLoopPromise<HookVerdict>
    }

    private struct State {
        var breaker: HookBreaker
        var cache: HookDecisionCache
        var slots: HookSlots<Waiter>
        var stats = Stats()
        /// A failure was logged and no success came since (one warning per change).
        var failing = false
    }

    let configuration: AuthorizationHookConfiguration
    private let client: WebhookHTTPClient
    private let key: SymmetricKey
    private let state: NIOLockedValueBox<State>
    private let logger: Logger
    /// The clock of the breaker and the cache (tests pass their own).
    private let now: @Sendable () -> NIODeadline

    /// Checks the configuration (the URL, a secret, positive timings).
    init(configuration: AuthorizationHookConfiguration, group: any EventLoopGroup, logger: Logger,
         now: @escaping @Sendable () -> NIODeadline = { .now() }) throws(AuthorizationHookConfigurationError) {
        guard let target = WebhookHTTPClient.Target(configuration.url) else {
            throw AuthorizationHookConfigurationError("authorization hook url '\(configuration.url)' is not an absolute http:// or https:// URL")
        }
        guard !configuration.secret.isEmpty else { throw AuthorizationHookConfigurationError("the authorization hook needs a secret (--auth-hook-secret)") }
        guard configuration.timeout > .zero, configuration.breakerOpenFor > .zero, configuration.breakerFailures > 0,
              configuration.cacheTTL >= .zero, configuration.maxCachedDecisions >= 0, configuration.maxConcurrentRequests > 0,
              configuration.maxWaitingRequests >= 0 else {
            throw AuthorizationHookConfigurationError("authorization hook timeout and breaker time must be > 0, breaker failures and concurrent requests ≥ 1, cache time and waiting requests ≥ 0")
        }
        do {
            client = try WebhookHTTPClient(target: target, timeout: configuration.timeout, group: group)
        } catch {
            throw AuthorizationHookConfigurationError("authorization hook TLS: \(error)")
        }
        self.configuration = configuration
        self.key = SymmetricKey(data: Data(configuration.secret.utf8))
        self.logger = logger
        self.now = now
        state = NIOLockedValueBox(State(breaker: HookBreaker(threshold: configuration.breakerFailures, openFor: configuration.breakerOpenFor),
                                        cache: HookDecisionCache(capacity: configuration.maxCachedDecisions),
                                        slots: HookSlots(capacity: configuration.maxConcurrentRequests, maxWaiting: configuration.maxWaitingRequests)))
    }

    /// The kept decision on `question`, if any (no request is made).
    func cached(_ question: HookQuestion) -> HookVerdict? {
        let key = question.cacheKey
        let now = self.now()
        return state.withLockedValue { state in
            guard let verdict = state.cache.verdict(for: key, now: now) else { return nil }
            state.stats.counts[question.event, default: [:]][.cached, default: 0] += 1
            return verdict
        }
    }

    /// The decision on `question`: kept, asked, or (no usable answer) the failure mode's. The
    /// future completes on `loop`.
    func ask(_ question: HookQuestion, failure: HookFailureMode, on loop: any EventLoop) -> EventLoopFuture<HookVerdict> {
        let key = question.cacheKey
        let now = self.now()
        enum Start { case kept(HookVerdict), skip, post, wait(EventLoopFuture<HookVerdict>), full }
        let promise = loop.makePromise(of: HookVerdict.self)
        let start: Start = state.withLockedValue { state in
            if let verdict = state.cache.verdict(for: key, now: now) {
                state.stats.counts[question.event, default: [:]][.cached, default: 0] += 1
                return .kept(verdict)
            }
            guard state.breaker.admit(now: now) else {
                state.stats.counts[question.event, default: [:]][.breakerOpen, default: 0] += 1
                return .skip
            }
            switch state.slots.admit(Waiter(question: question, failure: failure, promise: promise), now: now) {
            case .go: return .post
            case .wait: return .wait(promise.futureResult)
            case .full:
                state.stats.counts[question.event, default: [:]][.failed, default: 0] += 1
                return .full
            }
        }
        let verdict: HookVerdict
        switch start {
        case .kept(let kept): verdict = kept
        case .skip: verdict = Self.failed(question, "its circuit breaker is open after repeated failures", mode: failure)
        case .full: verdict = Self.failed(question, "\(configuration.maxWaitingRequests) requests are already waiting for it", mode: failure)
        case .wait(let future): return future
        case .post:
            post(question, failure: failure, timeout: configuration.timeout).hop(to: loop).cascade(to: promise)
            return promise.futureResult
        }
        promise.succeed(verdict)
        return promise.futureResult
    }

    /// POSTs a question with a slot of its own; the slot goes to the next waiter after the answer.
    private func post(_ question: HookQuestion, failure: HookFailureMode, timeout: TimeAmount) -> EventLoopFuture<HookVerdict> {
        let body = question.body(now: Int64(Date().timeIntervalSince1970 * 1000))
        let signature = HMAC<SHA256>.authenticationCode(for: body, using: self.key).map { String(format: "%02x", $0) }.joined()
        return client.post(body: body, headers: [("X-RTM-Signature", "sha256=\(signature)"), ("X-RTM-Event", question.event.rawValue)],
                           userAgent: "rtm-auth-hook", timeout: timeout)
            .map { reply -> Result<HookAnswer.Decision, HookFailure> in
                guard (200..<300).contains(reply.status.code) else { return .failure(HookFailure("HTTP \(reply.status.code)")) }
                return HookAnswer.read(reply.body, question: question)
            }
            .recover { error in .failure(HookFailure((error as? WebhookDeliveryError)?.reason ?? "\(error)")) }
            .map { [self] result in settle(question, result, failure: failure) }
            .always { [self] _ in releaseSlot() }
    }

    /// A slot is free: the oldest waiter within its time takes it; those past it get their
    /// failure mode.
    private func releaseSlot() {
        let timeout = configuration.timeout
        let (next, expired) = state.withLockedValue { state in
            let (next, expired) = state.slots.done(now: now(), maxWait: timeout)
            for waiter in expired { state.stats.counts[waiter.question.event, default: [:]][.failed, default: 0] += 1 }
            return (next, expired)
        }
        for waiter in expired {
            waiter.promise.succeed(Self.failed(waiter.question, "no answer within \(timeout): it waited for one of the \(configuration.maxConcurrentRequests) requests at a time", mode: waiter.failure))
        }
        if let (waiter, waited) = next {
            post(waiter.question, failure: waiter.failure, timeout: timeout - waited).cascade(to: waiter.promise)
        }
    }

    /// Counts, caches and logs an answer (or its absence); the verdict to apply.
    private func settle(_ question: HookQuestion, _ result: Result<HookAnswer.Decision, HookFailure>, failure: HookFailureMode) -> HookVerdict {
        let now = self.now()
        let defaultTTL = configuration.cacheTTL
        let (change, firstFailure) = state.withLockedValue { state -> (HookBreaker.Change?, Bool) in
            switch result {
            case .success(let decision):
                let change = state.breaker.succeeded()
                state.failing = false
                let outcome: Stats.Outcome = if case .deny = decision.verdict { .deny } else { .allow }
                state.stats.counts[question.event, default: [:]][outcome, default: 0] += 1
                // A payload rewrite is for this publish only; anything else is kept for its time
                // (a publish's only when the answer says: it may depend on the payload).
                let ttl = decision.cacheSeconds.map { TimeAmount.nanoseconds(Int64(max(0, min($0, 86_400)) * 1e9)) }
                    ?? (question.event == .publish ? .zero : defaultTTL)
                if ttl > .zero, !Self.rewritesPayload(decision.verdict) {
                    state.cache.dropExpired(now: now)
                    state.cache.keep(decision.verdict, for: question.cacheKey, until: now + ttl)
                }
                state.stats.breakerOpen = state.breaker.isOpen
                return (change, false)
            case .failure:
                let change = state.breaker.failed(now: now)
                let first = !state.failing
                state.failing = true
                state.stats.counts[question.event, default: [:]][.failed, default: 0] += 1
                state.stats.breakerOpen = state.breaker.isOpen
                return (change, first)
            }
        }
        switch change {
        case .opened?:
            logger.warning("authorization hook: circuit breaker open, requests are answered by their failure mode",
                           metadata: ["for": "\(configuration.breakerOpenFor)"])
        case .closed?:
            logger.notice("authorization hook: the backend answers again, circuit breaker closed")
        case nil: break
        }
        switch result {
        case .success(let decision):
            return decision.verdict
        case .failure(let why):
            if firstFailure {
                logger.warning("authorization hook failed (logged once until it answers again)",
                               metadata: ["url": "\(configuration.url)", "reason": "\(why)", "event": "\(question.event.rawValue)"])
            }
            return Self.failed(question, why.description, mode: failure)
        }
    }

    private static func rewritesPayload(_ verdict: HookVerdict) -> Bool {
        if case .allow(let rewrite?) = verdict { return rewrite.payload != nil }
        return false
    }

    private static func failed(_ question: HookQuestion, _ why: String, mode: HookFailureMode) -> HookVerdict {
        switch mode {
        case .open: .allow(nil)
        case .closed: .deny(question.unanswered(why))
        }
    }

    /// The counters so far.
    var stats: Stats { state.withLockedValue { $0.stats } }
}

/// An authorization hook configuration the server cannot use.
public struct AuthorizationHookConfigurationError: Error, CustomStringConvertible, Sendable {
    /// What is wrong.
    public let description: String
    init(_ description: String) { self.description = description }
}
