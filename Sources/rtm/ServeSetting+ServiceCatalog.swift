/// `rtm serve`'s settings for the services around the server: the authorization hook (README
/// "Security model"), the admin API and the cluster.
extension ServeSetting {
    static let authHook: [ServeSetting] = [
        authHookUrl, authHookSecret, authHookConnect, authHookTimeout, authHookConcurrency, authHookCache,
        authHookBreakerFailures, authHookBreakerOpen,
    ]
    static let admin: [ServeSetting] = [adminKey, adminListen, adminTlsCert, adminTlsKey]
    static let cluster: [ServeSetting] = [postgres, nodeId, clusterAddress, leaseSeconds, logRetentionHours]

    static let authHookUrl = ServeSetting("auth-hook", .text(default: nil, shape: "an http(s) URL"), help: """
        Ask the app's backend at this http(s) URL (POST, JSON, signed like the webhooks) about the subscribes and publishes \
        of the namespaces with hook-subscribe / hook-publish, and with auth-hook-connect about logins. Needs auth-hook-secret.
        """)
    static let authHookSecret = ServeSetting("auth-hook-secret", .text(default: nil, shape: "a string"),
                                             help: "Secret for the hook's X-RTM-Signature header: sha256=<hex HMAC-SHA256(secret, body)>.", secret: true)
    static let authHookConnect = ServeSetting("auth-hook-connect", .choice(default: nil, among: ["fail-closed", "fail-open"]), help: """
        Ask the hook about every login too, failing closed (fail-closed: refused when the backend cannot answer) or open (fail-open).
        """)
    static let authHookTimeout = ServeSetting("auth-hook-timeout", .number(default: 1, range: 0.001...60), help: """
        Seconds the hook has to answer (waiting for a free request counts); past it the request gets its failure mode.
        """)
    static let authHookConcurrency = ServeSetting("auth-hook-concurrency", .integer(default: 64, range: 1...10_000),
                                                  help: "Requests at the hook at once; more wait their turn (then they get their failure mode).")
    static let authHookCache = ServeSetting("auth-hook-cache", .number(default: 10, range: 0...86_400), help: """
        Seconds a login's or subscribe's allow or deny is reused for the same user and channel when the answer does not say \
        (cacheSeconds; a publish's decision only when its answer says); 0: never.
        """)
    static let authHookBreakerFailures = ServeSetting("auth-hook-breaker-failures", .integer(default: 5, range: 1...1_000_000), help: """
        Hook failures in a row that open its circuit breaker (requests then get their failure mode without asking).
        """)
    static let authHookBreakerOpen = ServeSetting("auth-hook-breaker-open", .number(default: 10, range: 0.001...86_400), help: """
        Seconds the open breaker waits before letting one request through to see whether the backend is back.
        """)

    static let adminKey = ServeSetting("admin-key", .text(default: nil, shape: "a string"),
                                       help: "Admin API and console key. Without one the admin listener is not started.", secret: true)
    static let adminListen = ServeSetting("admin-listen", .text(default: "127.0.0.1:9601", shape: "host:port"), help: """
        Admin listener address, host:port (loopback by default; port 0 = any free port). Off loopback, give it admin-tls-cert: \
        over plain HTTP the admin key crosses the network in clear.
        """)
    static let adminTlsCert = ServeSetting("admin-tls-cert", .text(default: nil, shape: "a PEM file path"), help: """
        TLS certificate chain (PEM) for the admin listener: https:// only (with admin-tls-key). SIGHUP reloads it.
        """)
    static let adminTlsKey = ServeSetting("admin-tls-key", .text(default: nil, shape: "a PEM file path"), help: "TLS private key (PEM) for admin-tls-cert.")

    static let postgres = ServeSetting("postgres", .text(default: nil, shape: "a postgres:// URL"), help: """
        Cluster: every node started with the same postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require] \
        URL is one service (channel messages, sessions, presence, peer status, user messages, metadata, history, locks, stream \
        channels); the schema is created or migrated at start. Call invitations stay per node.
        """, secret: true)
    static let nodeId = ServeSetting("node-id", .text(default: nil, shape: "a non-empty string"),
                                     help: "This node's name in the cluster, stored with the messages it publishes (default: hostname:port).")
    static let clusterAddress = ServeSetting("cluster-address", .text(default: nil, shape: "host:port"), help: """
        Cluster: host:port where the other nodes reach this node's GET /health, to ask it whether it reaches the database when \
        they cannot (default: the listening host, or the host name when listening on every interface, and port).
        """)
    static let leaseSeconds = ServeSetting("lease-seconds", .number(default: 10, range: 0.5...3600), help: """
        Cluster: how long this node's lease lasts, in seconds; renewed every fifth of it. A node that stops renewing is \
        declared dead by the others within lease + renewal interval (default 10: within 12 s).
        """)
    static let logRetentionHours = ServeSetting("log-retention-hours", .number(default: 24, range: 0.01...87_600),
                                                help: "Cluster: how long channel messages stay in the database's log, in hours (trimmed by one node every 10 minutes).")
}
