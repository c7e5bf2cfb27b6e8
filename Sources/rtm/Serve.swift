import Foundation
import ArgumentParser
import Logging
import RTMServer
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server (single node; user messages, metadata and history in SQLite under --data-dir).",
        discussion: """
            Stops gracefully on SIGTERM or SIGINT: clients are told to go away and reconnect later. \
            With --tls-cert/--tls-key it serves wss:// only; SIGHUP reloads the certificate (new connections get it, \
            open ones keep theirs; a file that cannot be used is logged and the old certificate stays).
            """)

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(name: .shortAndLong, help: "Port to bind (0 = any free port).") var port = 9600
    @Option(help: "Data directory: development credentials and the embedded store (rtm.sqlite, storage.sqlite).") var dataDir = "rtm-data"
    @Option(help: "App id to serve (with --app-certificate); default: the data directory's development app.") var appId: String?
    @Option(help: "Certificate of --app-id.") var appCertificate: String?
    @Option(help: "Seconds added to a client's heartbeat interval before it counts as lost (SPEC H-2).") var heartbeatSlack: Double = 10
    @Option(help: "Publishes per second per client (0 = unlimited).") var publishRate: Double = 60
    @Option(help: "Logins admitted per second (0 = unlimited).") var loginRate: Double = 2000
    @Option(help: "Seconds from a connection's TCP accept to its login (or join), whatever it sends meanwhile; then it is closed.") var loginDeadline: Double = 12
    @Option(help: "Error replies per second per connection after --error-reply-burst; a connection that keeps sending rejected requests past it is closed (1008). 0 = unlimited.") var errorReplyRate: Double = 100
    @Option(help: "Error replies one connection may get at once before --error-reply-rate applies.") var errorReplyBurst: Double = 1000
    @Option(help: "Event-loop threads (default: cores).") var threads: Int?
    @Option(help: "TLS certificate chain (PEM): serve wss:// (with --tls-key). SIGHUP reloads both files for new connections.") var tlsCert: String?
    @Option(help: "TLS private key (PEM) for --tls-cert.") var tlsKey: String?
    @Option(help: "POST events (userOnline, userOffline, joinChannel, leaveChannel, userMessageUndeliverable) as JSON to this http(s) URL, with --webhook-secret.") var webhookUrl: String?
    @Option(help: "Secret for the X-RTM-Signature header: sha256=<hex HMAC-SHA256(secret, body)>.") var webhookSecret: String?
    @Option(help: "Webhook events kept on disk for delivery; past it the oldest are dropped.") var webhookMaxQueued = 100_000
    /// Benchmarks' proof that loss is counted: this channel sequence number is never delivered.
    @Option(help: .hidden) var testDropSeq: UInt64?
    @Option(help: "Log level: trace, debug, info, notice, warning, error.") var logLevel = "info"

    func run() async throws {
        FileLimit.raise()
        var logger = Logger(label: "rtm.server")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        var config = ServerConfiguration()
        config.host = host
        config.port = port
        config.heartbeatSlack = .nanoseconds(Int64(heartbeatSlack * 1e9))
        config.publishRatePerSecond = publishRate
        config.loginRatePerSecond = loginRate
        config.loginDeadline = .nanoseconds(Int64(loginDeadline * 1e9))
        config.errorReplyRatePerSecond = errorReplyRate
        config.errorReplyBurst = errorReplyBurst
        if let threads { config.threads = threads }
        config.dataDirectory = dataDir
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
        let server = try RTMServer(configuration: config, logger: logger)
        // SIGHUP reloads the certificate only when there is one (otherwise it keeps its default).
        let services: [any Service] = [server] + (tlsCert != nil ? [CertificateReloader(server: server)] : [])
        let group = ServiceGroup(configuration: .init(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
