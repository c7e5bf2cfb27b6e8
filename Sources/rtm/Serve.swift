import Foundation
import ArgumentParser
import Logging
import RTMPostgres
import RTMServer
import ServiceLifecycle

/// `rtm serve`: the server, its settings read through swift-configuration
/// (`ServeSettingsReader`) from the command line, the environment and a configuration file.
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
            open ones keep theirs; a file that cannot be used is logged and the old certificate stays), and reads the \
            configuration file again for the settings it says it reloads.

            """ + ServeSetting.helpText)

    /// The settings as typed (`--port 9600 --namespace 'news.*:no-presence' …`), read by
    /// `ServeSettingsReader` with the environment and the configuration file.
    @Argument(parsing: .captureForPassthrough, help: .hidden) var settings: [String] = []

    func run() async throws {
        guard #available(macOS 15, iOS 18, *) else { throw ValidationError("rtm serve needs macOS 15 or later") }
        // Every argument is passed through to the settings reader, the help flags too.
        if settings.contains("--help") || settings.contains("-h") { return print(Self.helpMessage()) }
        do {
            try await serve()
        } catch let error as DataDirectoryError {
            // Named in our words, with the way out; never the file system layer's error text.
            throw ServeDataDirectoryError(error: error)
        }
    }

    @available(macOS 15, iOS 18, *)
    private func serve() async throws {
        let values = try ServeSettingsReader(arguments: settings, environment: ProcessInfo.processInfo.environment).read()
        FileLimit.raise()
        // One level for every logger of the server, which SIGHUP can change (ServeReloader).
        LoggingSystem.bootstrap(ServeLogHandler.init)
        ServeLogHandler.level.withLockedValue { $0 = values.logLevel }
        let logger = Logger(label: "rtm.server")
        var config = try values.serverConfiguration()
        let cluster = try values.applyCluster(to: &config, logger: logger)
        try configureApps(&config, values: values)
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
        // defaults) and the settings the reloader names.
        let reloader = ServeReloader(server: server, arguments: settings,
                                     reloadsTLS: config.tlsCertificatePath != nil || config.adminTLSCertificatePath != nil, logger: logger)
        let services: [any Service] = [server, reloader]
        let group = ServiceGroup(configuration: .init(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// app-id with app-certificate, or the data directory's development app.
    private func configureApps(_ config: inout ServerConfiguration, values: ServeSettingValues) throws {
        if let appId = values.string(.appId) {
            guard let appCertificate = values.string(.appCertificate) else {
                throw ServeSettingError.together([.appId, .appCertificate], "go together")
            }
            config.apps = [appId: appCertificate]
            return
        }
        let dataDir = values.text(.dataDir)
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
}

/// A data directory `rtm serve` cannot use: what failed, and the option that chooses another.
struct ServeDataDirectoryError: Error, CustomStringConvertible {
    let error: DataDirectoryError

    var description: String {
        "\(error). Choose a directory you can write with --data-dir <path> "
            + "(the default, rtm-data, is created in the current directory)."
    }
}
