import ArgumentParser
import NIOCore
import RTMServer

/// `rtm serve`'s authorization hook (README "Security model"): the app's backend, asked over
/// HTTP whether a login, a subscribe or a publish may go ahead. Each maps to the
/// `AuthorizationHookConfiguration` field of the same name and has its default.
struct ServeAuthHookOptions: ParsableArguments {
    @Option(help: "Ask the app's backend at this http(s) URL (POST, JSON, signed like the webhooks) about the subscribes and publishes of the namespaces with hook-subscribe / hook-publish, and with --auth-hook-connect about logins. Needs --auth-hook-secret.")
    var authHook: String?
    @Option(help: "Secret for the hook's X-RTM-Signature header: sha256=<hex HMAC-SHA256(secret, body)>.")
    var authHookSecret: String?
    @Option(help: "Ask the hook about every login too, failing closed (fail-closed: refused when the backend cannot answer) or open (fail-open).")
    var authHookConnect: String?
    @Option(help: "Seconds the hook has to answer (waiting for a free request counts); past it the request gets its failure mode.")
    var authHookTimeout: Double = 1
    @Option(help: "Requests at the hook at once; more wait their turn (at most 10,000, then they get their failure mode).")
    var authHookConcurrency = 64
    @Option(help: "Seconds a login's or subscribe's allow or deny is reused for the same user and channel when the answer does not say (cacheSeconds; a publish's decision only when its answer says); 0: never.")
    var authHookCache: Double = 10
    @Option(help: "Hook failures in a row that open its circuit breaker (requests then get their failure mode without asking).")
    var authHookBreakerFailures = 5
    @Option(help: "Seconds the open breaker waits before letting one request through to see whether the backend is back.")
    var authHookBreakerOpen: Double = 10

    /// Checks the values and sets them on `config`.
    func apply(to config: inout ServerConfiguration) throws {
        guard let authHook else {
            guard authHookSecret == nil, authHookConnect == nil else { throw ValidationError("--auth-hook-secret and --auth-hook-connect need --auth-hook") }
            return
        }
        guard let authHookSecret, !authHookSecret.isEmpty else { throw ValidationError("--auth-hook needs --auth-hook-secret") }
        var hook = AuthorizationHookConfiguration(url: authHook, secret: authHookSecret)
        if let authHookConnect {
            guard let mode = HookFailureMode(rawValue: authHookConnect) else {
                throw ValidationError("--auth-hook-connect must be fail-closed or fail-open, got '\(authHookConnect)'")
            }
            hook.connect = mode
        }
        guard authHookTimeout > 0, authHookCache >= 0, authHookBreakerFailures > 0, authHookBreakerOpen > 0, authHookConcurrency > 0 else {
            throw ValidationError("--auth-hook-timeout and --auth-hook-breaker-open must be > 0, --auth-hook-cache ≥ 0, --auth-hook-breaker-failures and --auth-hook-concurrency ≥ 1")
        }
        hook.maxConcurrentRequests = authHookConcurrency
        hook.timeout = .nanoseconds(Int64(authHookTimeout * 1e9))
        hook.cacheTTL = .nanoseconds(Int64(authHookCache * 1e9))
        hook.breakerFailures = authHookBreakerFailures
        hook.breakerOpenFor = .nanoseconds(Int64(authHookBreakerOpen * 1e9))
        config.authorizationHook = hook
    }
}
