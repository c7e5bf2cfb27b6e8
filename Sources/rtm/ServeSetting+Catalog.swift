/// Every setting of `rtm serve`, in the order `rtm serve --help` and docs/configuration.md list
/// them. The listener, the apps and the per-connection limits are here; durability, the
/// authorization hook, the admin API and the cluster have their own files.
extension ServeSetting {
    static let all: [ServeSetting] = [
        config, host, port, dataDir, appId, appCertificate, namespace, defaultCapability, heartbeatSlack, publishRate, loginRate, loginDeadline,
        memoryTrimInterval, errorReplyRate, errorReplyBurst, maxConnections, threads, drainRate, drainTimeout, drainReconnectSpread,
        tlsCert, tlsKey, webhookUrl, webhookSecret, webhookMaxQueued, logLevel,
    ] + store + authHook + admin + cluster + testing

    static let config = ServeSetting("config", .text(default: nil, shape: "a .json, .yaml or .yml file path"), help: """
        A configuration file of these settings, JSON ({"port": 9600, "namespace": ["private.*:private"]}) or YAML (by its \
        .yaml / .yml name); its keys are the settings' names. The command line wins, then the environment, then the file. \
        SIGHUP reads it again.
        """, inFile: false)
    static let host = ServeSetting("host", .text(default: "127.0.0.1", shape: "an address"), help: "Address to bind.")
    static let port = ServeSetting("port", .integer(default: 9600, range: 0...65535), help: "Port to bind (0 = any free port).", short: "p")
    static let dataDir = ServeSetting("data-dir", .text(default: "rtm-data", shape: "a directory path"), help: """
        Data directory: development credentials and the embedded store (rtm.sqlite, storage.sqlite, invitations.sqlite).
        """)
    static let appId = ServeSetting("app-id", .text(default: nil, shape: "a string"),
                                    help: "App id to serve (with app-certificate); default: the data directory's development app.")
    static let appCertificate = ServeSetting("app-certificate", .text(default: nil, shape: "a string"), help: "Certificate of app-id.", secret: true)
    static let namespace = ServeSetting("namespace", .texts(shape: "PATTERN:OPTION,…"), help: """
        A channel namespace, PATTERN:OPTION,… (repeatable; the first matching pattern wins): private (only a grant opens it: a \
        capability token's, see `rtm token --capability`, or the default capability's), no-client-publish (the backend publishes, through the admin API), \
        no-presence, no-history, max-members=N, hook-subscribe / hook-publish (ask auth-hook), hook-fail-open, \
        replay-window=SECONDS and replay-max=N (instead of channel-replay-window / channel-replay-max). \
        E.g. 'private.*:private', 'news.*:no-client-publish,no-presence'. SIGHUP reloads them.
        """)
    static let defaultCapability = ServeSetting("default-capability", .text(default: nil, shape: "a capability token's rtm claim as JSON"), help: """
        What a session whose login brought no capability token may do, as a capability token's rtm claim: \
        '{"channels":{"lobby":["subscribe","presence"]},"users":{"*":["send"]}}'. Without it such a session may do anything \
        outside the private namespaces (set it whenever the app gives its users capability tokens). SIGHUP reloads it.
        """)
    static let heartbeatSlack = ServeSetting("heartbeat-slack", .number(default: 10, range: 0.1...3600),
                                             help: "Seconds added to a client's heartbeat interval before it counts as lost (SPEC H-2).")
    static let publishRate = ServeSetting("publish-rate", .number(default: 60, range: 0...1_000_000),
                                          help: "Publishes per second per client (0 = unlimited). SIGHUP reloads it.")
    static let loginRate = ServeSetting("login-rate", .number(default: 2000, range: 0...1_000_000),
                                        help: "Logins admitted per second (0 = unlimited).")
    static let loginDeadline = ServeSetting("login-deadline", .number(default: 12, range: 0.1...3600), help: """
        Seconds from a connection's TCP accept to its login (or join), whatever it sends meanwhile; then it is closed.
        """)
    static let memoryTrimInterval = ServeSetting("memory-trim-interval", .number(default: 10, range: 0...86_400), help: """
        Seconds between checks that give unused memory back to the system (after a flood, slow consumers or many closed \
        connections); 0: never.
        """)
    static let errorReplyRate = ServeSetting("error-reply-rate", .number(default: 100, range: 0...1_000_000), help: """
        Error replies per second per connection after error-reply-burst; a connection that keeps sending rejected requests \
        past it is closed (1008). 0 = unlimited. SIGHUP reloads it.
        """)
    static let errorReplyBurst = ServeSetting("error-reply-burst", .number(default: 1000, range: 1...1_000_000),
                                              help: "Error replies one connection may get at once before error-reply-rate applies. SIGHUP reloads it.")
    static let maxConnections = ServeSetting("max-connections", .integer(default: nil, range: 1...10_000_000), help: """
        Client sockets held at once; past it a new connection is closed as soon as it is accepted (default: the open-file \
        limit, raised to its hard limit at start, less 128 for the server's own files).
        """)
    static let threads = ServeSetting("threads", .integer(default: nil, range: 1...1024), help: "Event-loop threads (default: cores).")
    static let drainRate = ServeSetting("drain-rate", .number(default: 1000, range: 0.1...1_000_000),
                                        help: "Drain (SIGTERM/SIGINT): clients sent goaway per second, in batches every 100 ms.")
    static let drainTimeout = ServeSetting("drain-timeout", .number(default: 30, range: 0...86_400),
                                           help: "Drain: seconds to wait for every client to go before stopping anyway.")
    static let drainReconnectSpread = ServeSetting("drain-reconnect-spread", .number(default: 1, range: 0...3600), help: """
        Drain: seconds over which a client spreads its reconnection (sent in goaway as reconnectDelay; 0 = at once).
        """)
    static let tlsCert = ServeSetting("tls-cert", .text(default: nil, shape: "a PEM file path"),
                                      help: "TLS certificate chain (PEM): serve wss:// (with tls-key). SIGHUP reloads both files for new connections.")
    static let tlsKey = ServeSetting("tls-key", .text(default: nil, shape: "a PEM file path"), help: "TLS private key (PEM) for tls-cert.")
    static let webhookUrl = ServeSetting("webhook-url", .text(default: nil, shape: "an http(s) URL"), help: """
        POST events (userOnline, userOffline, joinChannel, leaveChannel, userMessageUndeliverable) as JSON to this http(s) URL, \
        with webhook-secret. SIGHUP reloads it.
        """)
    static let webhookSecret = ServeSetting("webhook-secret", .text(default: nil, shape: "a string"),
                                            help: "Secret for the X-RTM-Signature header: sha256=<hex HMAC-SHA256(secret, body)>.", secret: true)
    static let webhookMaxQueued = ServeSetting("webhook-max-queued", .integer(default: 100_000, range: 1...100_000_000),
                                               help: "Webhook events kept on disk for delivery; past it the oldest are dropped.")
    static let logLevel = ServeSetting("log-level", .choice(default: "info", among: ["trace", "debug", "info", "notice", "warning", "error"]),
                                       help: "Log level. SIGHUP reloads it.")

    /// Settings for the tests only (not in `--help`).
    static let testing: [ServeSetting] = [testDropSeq, testLockTtlMin, testInvitationExpiry, testClusterProbeTimeout]
    /// Benchmarks' proof that loss is counted: this channel sequence number is never delivered.
    static let testDropSeq = ServeSetting("test-drop-seq", .integer(default: nil, range: 1...Int.max), help: "", hidden: true)
    /// Shorter lock TTLs (seconds; the reference's minimum is 10), so that a release after the
    /// TTL is seen in a second.
    static let testLockTtlMin = ServeSetting("test-lock-ttl-min", .integer(default: nil, range: 1...300), help: "", hidden: true)
    /// Shorter call invitation expiry (seconds; 60 by default), so that a test across a restart
    /// sees it in seconds.
    static let testInvitationExpiry = ServeSetting("test-invitation-expiry", .number(default: nil, range: 0.01...3600), help: "", hidden: true)
    /// A longer wait (seconds; 1 by default) for the other nodes' `/health` and for a lapsed
    /// node's own try of the database (`ServerConfiguration.clusterPeerProbeTimeout`), so that a
    /// loaded test machine's slow database round trip is not taken for a cut-off.
    static let testClusterProbeTimeout = ServeSetting("test-cluster-probe-timeout", .number(default: nil, range: 0.01...60), help: "", hidden: true)
}
