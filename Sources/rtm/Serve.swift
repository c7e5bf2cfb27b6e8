import Foundation
import ArgumentParser
import Logging
import RTMPostgres
import RTMServer
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server (single node, or a cluster node with --postgres; user messages, metadata and history in SQLite under --data-dir).",
        discussion: """
            Stops gracefully on SIGTERM or SIGINT by draining: /ready answers 503, new WebSocket upgrades \
            are refused, connected clients get a goaway frame in paced batches (--drain-rate a second) and \
            reconnect elsewhere (or here, once the server is back), keeping their sessions' grace window; \
            the process exits when every client is gone or after --drain-timeout. GET /health, /ready and \
            /metrics (Prometheus) answer on the same port. \
            With --tls-cert/--tls-key it serves wss:// only; SIGHUP reloads the certificate (new connections get it, \
            open ones keep theirs; a file that cannot be used is logged and the old certificate stays).
            """)

    @Option(help: "A JSON file of these options ({\"port\": 9600, \"namespace\": [\"private.*:private\"], \"store-full-sync\": true}); each may also come from an environment variable (RTM_PORT, RTM_NAMESPACE with one value per line, …). The command line wins, then the environment, then the file. Also RTM_CONFIG.") var config: String?
    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(name: .shortAndLong, help: "Port to bind (0 = any free port).") var port = 9600
    @Option(help: "Data directory: development credentials and the embedded store (rtm.sqlite, storage.sqlite, invitations.sqlite).") var dataDir = "rtm-data"
    @Option(help: "App id to serve (with --app-certificate); default: the data directory's development app.") var appId: String?
    @Option(help: "Certificate of --app-id.") var appCertificate: String?
    @Option(help: "A channel namespace, PATTERN:OPTION,… (repeatable; the first matching pattern wins): private (only a capability token's grant opens it, see `rtm token --capability`), no-client-publish (the backend publishes, through the admin API), no-presence, no-history, max-members=N, hook-subscribe / hook-publish (ask --auth-hook), hook-fail-open, replay-window=SECONDS and replay-max=N (instead of --channel-replay-window / --channel-replay-max). E.g. 'private.*:private', 'news.*:no-client-publish,no-presence'.") var namespace: [String] = []
    @Option(help: "What a session whose login brought no capability token may do, as a capability token's rtm claim: '{\"channels\":{\"lobby\":[\"subscribe\",\"presence\"]},\"users\":{\"*\":[\"send\"]}}'. Without it such a session may do anything outside the private namespaces (set it whenever the app gives its users capability tokens). SIGHUP reloads it.")
    var defaultCapability: String?
    @Option(help: "Seconds added to a client's heartbeat interval before it counts as lost (SPEC H-2).") var heartbeatSlack: Double = 10
    @Option(help: "Publishes per second per client (0 = unlimited).") var publishRate: Double = 60
    @Option(help: "Logins admitted per second (0 = unlimited).") var loginRate: Double = 2000
    @Option(help: "Seconds from a connection's TCP accept to its login (or join), whatever it sends meanwhile; then it is closed.") var loginDeadline: Double = 12
    @Option(help: "Seconds between checks that give unused memory back to the system (after a flood, slow consumers or many closed connections); 0: never.") var memoryTrimInterval: Double = 10
    @Option(help: "Error replies per second per connection after --error-reply-burst; a connection that keeps sending rejected requests past it is closed (1008). 0 = unlimited.") var errorReplyRate: Double = 100
    @Option(help: "Error replies one connection may get at once before --error-reply-rate applies.") var errorReplyBurst: Double = 1000
    @Option(help: "Drain (SIGTERM/SIGINT): clients sent goaway per second, in batches every 100 ms.") var drainRate: Double = 1000
    @Option(help: "Drain: seconds to wait for every client to go before stopping anyway.") var drainTimeout: Double = 30
    @Option(help: "Drain: seconds over which a client spreads its reconnection (sent in goaway as reconnectDelay; 0 = at once).") var drainReconnectSpread: Double = 1
    @Option(help: "Event-loop threads (default: cores).") var threads: Int?
    @Option(help: "TLS certificate chain (PEM): serve wss:// (with --tls-key). SIGHUP reloads both files for new connections.") var tlsCert: String?
    @Option(help: "TLS private key (PEM) for --tls-cert.") var tlsKey: String?
    @Option(help: "POST events (userOnline, userOffline, joinChannel, leaveChannel, userMessageUndeliverable) as JSON to this http(s) URL, with --webhook-secret.") var webhookUrl: String?
    @Option(help: "Secret for the X-RTM-Signature header: sha256=<hex HMAC-SHA256(secret, body)>.") var webhookSecret: String?
    @Option(help: "Webhook events kept on disk for delivery; past it the oldest are dropped.") var webhookMaxQueued = 100_000
    /// Benchmarks' proof that loss is counted: this channel sequence number is never delivered.
    @Option(help: .hidden) var testDropSeq: UInt64?
    /// Tests' shorter lock TTLs (seconds; the reference's minimum is 10), so that a release after
    /// the TTL is seen in a second.
    @Option(help: .hidden) var testLockTtlMin: Int?
    /// Tests' shorter call invitation expiry (seconds; 60 by default), so that a test across a
    /// restart sees it in seconds.
    @Option(help: .hidden) var testInvitationExpiry: Double?
    @Option(help: "Log level: trace, debug, info, notice, warning, error.") var logLevel = "info"
    @Option(help: "Admin API and console key (default: $RTM_ADMIN_KEY). Without one the admin listener is not started.") var adminKey: String?
    @Option(help: "Admin listener address, host:port (loopback by default; port 0 = any free port). Off loopback, give it --admin-tls-cert: over plain HTTP the admin key crosses the network in clear.") var adminListen = "127.0.0.1:9601"
    @Option(help: "TLS certificate chain (PEM) for the admin listener: https:// only (with --admin-tls-key). SIGHUP reloads it.") var adminTlsCert: String?
    @Option(help: "TLS private key (PEM) for --admin-tls-cert.") var adminTlsKey: String?
    @Option(help: "Cluster: every node started with the same postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require] URL is one service (channel messages, sessions, presence, peer status, user messages, metadata, history, locks, stream channels); the schema is created or migrated at start. Call invitations stay per node.") var postgres: String?
    @Option(help: "This node's name in the cluster, stored with the messages it publishes (default: hostname:port).") var nodeId: String?
    @Option(help: "Cluster: host:port where the other nodes reach this node's GET /health, to ask it whether it reaches the database when they cannot (default: the listening host, or the host name when listening on every interface, and port).") var clusterAddress: String?
    @Option(help: "Cluster: how long this node's lease lasts, in seconds; renewed every fifth of it. A node that stops renewing is declared dead by the others within lease + renewal interval (default 10: within 12 s).") var leaseSeconds: Double = 10
    @Option(help: "Cluster: how long channel messages stay in the database's log, in hours (trimmed by one node every 10 minutes).") var logRetentionHours: Double = 24

    @OptionGroup(title: "Durability and retention") var store: ServeStoreOptions
    @OptionGroup(title: "Authorization hook") var authHook: ServeAuthHookOptions

    @Option(help: "Client sockets held at once; past it a new connection is closed as soon as it is accepted (default: the open-file limit, raised to its hard limit at start, less 128 for the server's own files).") var maxConnections: Int?

    func run() async throws {
        do {
            try await serve()
        } catch let error as DataDirectoryError {
            // Named in our words, with the way out; never the file system layer's error text.
            throw ServeDataDirectoryError(error: error)
        }
    }

    private func serve() async throws {
        FileLimit.raise()
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error; got '\(logLevel)'")
        }
        // One level for every logger of the server, which SIGHUP can change (ServeReloader).
        LoggingSystem.bootstrap(ServeLogHandler.init)
        ServeLogHandler.level.withLockedValue { $0 = level }
        let logger = Logger(label: "rtm.server")
        var config = ServerConfiguration()
        config.host = host
        config.port = port
        config.heartbeatSlack = .nanoseconds(Int64(heartbeatSlack * 1e9))
        config.publishRatePerSecond = publishRate
        config.namespaces = try namespace.map { text in
            do throws(NamespaceError) { return try ChannelNamespace(parsing: text) } catch { throw ValidationError("--namespace: \(error)") }
        }
        config.defaultCapabilities = try Self.defaultCapabilities(defaultCapability)
        config.loginRatePerSecond = loginRate
        if let maxConnections {
            guard maxConnections > 0 else { throw ValidationError("--max-connections must be > 0, got \(maxConnections)") }
            config.maxConnections = maxConnections
        }
        config.loginDeadline = .nanoseconds(Int64(loginDeadline * 1e9))
        config.memoryTrimInterval = .nanoseconds(Int64(max(0, memoryTrimInterval) * 1e9))
        config.errorReplyRatePerSecond = errorReplyRate
        config.errorReplyBurst = errorReplyBurst
        guard drainRate > 0, drainTimeout >= 0, drainReconnectSpread >= 0 else {
            throw ValidationError("--drain-rate must be > 0, --drain-timeout and --drain-reconnect-spread ≥ 0")
        }
        config.drainRate = drainRate
        config.drainTimeout = .nanoseconds(Int64(drainTimeout * 1e9))
        config.drainReconnectSpread = .nanoseconds(Int64(drainReconnectSpread * 1e9))
        if let threads { config.threads = threads }
        config.dataDirectory = dataDir
        try store.apply(to: &config)
        try authHook.apply(to: &config)
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        config.tlsCertificatePath = tlsCert
        config.tlsKeyPath = tlsKey
        if let webhookUrl {
            guard let webhookSecret, !webhookSecret.isEmpty else { throw ValidationError("--webhook-url needs --webhook-secret") }
            var webhook = WebhookConfiguration(url: webhookUrl, secret: webhookSecret)
            webhook.maxQueuedEvents = webhookMaxQueued
            config.webhook = webhook
        } else if webhookSecret != nil {
            throw ValidationError("--webhook-secret needs --webhook-url")
        }
        config.testDropSeq = testDropSeq
        if let testLockTtlMin { config.lockTTLRange = max(1, testLockTtlMin)...config.lockTTLRange.upperBound }
        if let testInvitationExpiry { config.invitationExpiry = .nanoseconds(Int64(max(0.01, testInvitationExpiry) * 1e9)) }
        try configureAdmin(&config)
        let cluster = try configureCluster(&config, logger: logger)
        if let appId {
            guard let appCertificate else { throw ValidationError("--app-id needs --app-certificate") }
            config.apps = [appId: appCertificate]
        } else {
            let (credentials, created) = try DevCredentials.loadOrCreate(dataDir: dataDir)
            config.apps = [credentials.appId: credentials.appCertificate]
            let origin = created ? "created a development app in" : "development app from"
            let text = """
                \(origin) \(DevCredentials.path(in: dataDir)):
                  app id:          \(credentials.appId)
                  app certificate: \(credentials.appCertificate)
                client commands run in this directory use it by themselves (rtm listen, rtm pub, ...)

                """
            FileHandle.standardOutput.write(Data(text.utf8))   // unbuffered: shown before the log lines
        }
        // Cluster mode: user messages in the shared database too.
        var userStore: PostgresUserMessageStore?
        if let cluster {
            userStore = try await PostgresUserMessageStore.open(location: cluster.location, node: cluster.node, listener: cluster.listener,
                                                                logger: logger)
            // Metadata, history and locks shared too.
            config.sharedServices = PostgresServices(location: cluster.location, node: cluster.node, listener: cluster.listener, logger: logger)
        }
        let server = try RTMServer(configuration: config, store: userStore, logger: logger)
        // SIGHUP reloads the certificates (when there are some; otherwise they keep their
        // defaults) and the log level.
        let reloader = ServeReloader(server: server, arguments: Array(CommandLine.arguments.drop { $0 != "serve" }.dropFirst()),
                                     reloadsTLS: tlsCert != nil || adminTlsCert != nil, logger: logger)
        let services: [any Service] = [server, reloader]
        let group = ServiceGroup(configuration: .init(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// --postgres and --node-id: channel messages through the PostgreSQL backplane.
    private func configureCluster(_ config: inout ServerConfiguration, logger: Logger) throws
        -> (location: PostgresLocation, node: String, listener: PostgresListener)? {
        guard let postgres else {
            if nodeId != nil { throw ValidationError("--node-id needs --postgres") }
            if clusterAddress != nil { throw ValidationError("--cluster-address needs --postgres") }
            return nil
        }
        if let clusterAddress {
            guard let colon = clusterAddress.lastIndex(of: ":"), colon != clusterAddress.startIndex,
                  let port = Int(clusterAddress[clusterAddress.index(after: colon)...]), (1...65535).contains(port) else {
                throw ValidationError("--cluster-address must be host:port, got '\(clusterAddress)'")
            }
            config.clusterAddress = clusterAddress
        }
        let location: PostgresLocation
        do { location = try PostgresLocation(url: postgres) } catch { throw ValidationError("--postgres: \(error)") }
        let node = nodeId ?? "\(ProcessInfo.processInfo.hostName):\(port == 0 ? String(UInt32.random(in: 1...UInt32.max), radix: 36) : String(port))"
        guard !node.isEmpty else { throw ValidationError("--node-id must not be empty") }
        logger.info("cluster mode", metadata: ["postgres": "\(location.redacted)", "node": "\(node)"])
        guard leaseSeconds >= 0.5 else { throw ValidationError("--lease-seconds must be at least 0.5, got \(leaseSeconds)") }
        guard logRetentionHours > 0 else { throw ValidationError("--log-retention-hours must be positive, got \(logRetentionHours)") }
        var options = PostgresBackplaneOptions()
        options.lease = .milliseconds(Int64(leaseSeconds * 1000))
        options.leaseInterval = .milliseconds(Int64(leaseSeconds * 200))
        options.retention = .seconds(Int64(logRetentionHours * 3600))
        options.resendWindow = config.publishResendWindow   // ids a starting node reads back (M-3)
        options.resendMemory = config.dedupCapacity
        // One listening connection for the node's three kinds of wake-up (`PostgresListener`).
        let listener = PostgresListener(location: location)
        config.backplane = PostgresChannelBackplane(location: location, node: node, options: options, listener: listener, logger: logger)
        return (location, node, listener)
    }

    /// --admin-key / RTM_ADMIN_KEY and --admin-listen.
    private func configureAdmin(_ config: inout ServerConfiguration) throws {
        guard let key = adminKey ?? ProcessInfo.processInfo.environment["RTM_ADMIN_KEY"], !key.isEmpty else { return }
        guard let colon = adminListen.lastIndex(of: ":"), let port = Int(adminListen[adminListen.index(after: colon)...]),
              (0...65535).contains(port) else {
            throw ValidationError("--admin-listen must be host:port, got '\(adminListen)'")
        }
        guard (adminTlsCert == nil) == (adminTlsKey == nil) else { throw ValidationError("--admin-tls-cert and --admin-tls-key go together") }
        config.adminKey = key
        config.adminHost = String(adminListen[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        config.adminPort = port
        config.adminTLSCertificatePath = adminTlsCert
        config.adminTLSKeyPath = adminTlsKey
    }
}

/// A data directory `rtm serve` cannot use: what failed, and the option that chooses another.
struct ServeDataDirectoryError: Error, CustomStringConvertible {
    let error: DataDirectoryError

    var description: String {
        "\(error). Choose a directory you can write with --data-dir <path> "
            + "(the default, rtm-data, is created in the current directory)."
    }
}
