import Atomics
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import RTMAuth
import RTMProtocol
import ServiceLifecycle

/// The real-time messaging server: WebSocket endpoint `/v1` (subprotocol `rtm.v1`), sessions,
/// message channels, user messages and presence, in memory.
///
/// ```swift
/// var config = ServerConfiguration()
/// config.port = 0
/// config.apps = ["myapp": "certificate"]
/// let server = RTMServer(configuration: config)
/// let port = try await server.start()
/// // ...
/// try await server.shutdown()
/// ```
/// It is also a ServiceLifecycle `Service`: `run()` starts it and shuts it down gracefully when
/// the service group is told to (SIGTERM / SIGINT in `rtm serve`).
public final class RTMServer: Service, Sendable {
    /// This server's version (the admin API's `info`, `/metrics`' `rtm_build_info`).
    public static let version = RTMVersion.current
    static let notUpgradedHandlerName = "rtm.notUpgraded"
    static let rawHandlerName = "rtm.raw"
    /// The sizes of a connection's receive buffer. NIO keeps the buffer of a connection's last
    /// read for its next one, sized when first allocated: NIO's default of 2 KiB held by every
    /// idle connection was a quarter of its memory. Most connections read small frames (a
    /// heartbeat is 30 bytes, the upgrade request and `login` a few hundred), so reads start at
    /// 512 bytes; a connection whose reads fill the buffer gets one twice as large for the next,
    /// up to 64 KiB (a publisher streaming flat out is there after a few reads).
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536)

    /// The configuration the server was made with.
    public let configuration: ServerConfiguration
    private let group: MultiThreadedEventLoopGroup
    let hub: Hub
    let logger: Logger
    private let serverChannel = NIOLockedValueBox<(any Channel)?>(nil)
    private let admin = AdminHTTPServer()
    /// Gives freed memory back to the system when load ends.
    let memoryTrimmer: MemoryTrimmer
    private let tls: ServerTLS?
    private let adminTLS: ServerTLS?

    /// Creates a server and opens its store (`configuration.dataDirectory`, or the given
    /// `store`); nothing is bound until `start()`.
    public init(configuration: ServerConfiguration, store: (any UserMessageStore)? = nil,
                logger: Logger = Logger(label: "rtm.server")) throws {
        self.configuration = configuration
        self.logger = logger
        self.memoryTrimmer = MemoryTrimmer(interval: configuration.memoryTrimInterval, logger: logger)
        self.tls = try ServerTLS(certificatePath: configuration.tlsCertificatePath, keyPath: configuration.tlsKeyPath,
                                 names: ("tlsCertificatePath", "tlsKeyPath"))
        self.adminTLS = try ServerTLS(certificatePath: configuration.adminTLSCertificatePath, keyPath: configuration.adminTLSKeyPath,
                                      names: ("adminTLSCertificatePath", "adminTLSKeyPath"))
        let store = try store ?? SQLiteUserMessageStore(
            path: configuration.dataDirectory.map { ($0 as NSString).appendingPathComponent("rtm.sqlite") },
            fullSync: configuration.storeFullSync)
        // Each loop's ticks are counted (LoopTicks): deadlines and the publish rate limit then
        // tell the server's own lateness from a client's silence or burst.
        let ticks = TickObserver()
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, min(configuration.threads, 64)), metricsDelegate: ticks)
        var loops: [any EventLoop] = []
        var iterator = group.makeIterator()
        while let loop = iterator.next() { loops.append(loop) }
        let serviceStore: any ServiceStore = try configuration.sharedServices ?? SQLiteServiceStore(
            path: configuration.dataDirectory.map { ($0 as NSString).appendingPathComponent("storage.sqlite") },
            fullSync: configuration.storeFullSync)
        let group = self.group
        let webhooks = try configuration.webhook.map {
            try WebhookDispatcher(configuration: $0, dataDirectory: configuration.dataDirectory, fullSync: configuration.storeFullSync,
                                  group: group, logger: logger)
        }
        if configuration.authorizationHook == nil, let hooked = configuration.namespaces.first(where: { !$0.hooks.isEmpty }) {
            throw AuthorizationHookConfigurationError("namespace '\(hooked.pattern)' asks the authorization hook, but none is configured (--auth-hook)")
        }
        let authorizationHook = try configuration.authorizationHook.map { hook throws(AuthorizationHookConfigurationError) in
            try AuthorizationHook(configuration: hook, group: group, logger: logger)
        }
        self.hub = Hub(configuration: configuration, loops: loops, store: store, serviceStore: serviceStore,
                       invitationStore: try Self.invitationStore(configuration), logger: logger, webhooks: webhooks,
                       authorizationHook: authorizationHook)
        ticks.install(Dictionary(uniqueKeysWithValues: hub.fanouts.map { (ObjectIdentifier($0.eventLoop), $0.liveness.ticks) }))
    }

    /// Where call invitations are kept (§1.8): the configured store; on a single node with a
    /// data directory, `invitations.sqlite` in it; otherwise in memory (no data directory; a
    /// cluster node, whose invitations the backplane's log keeps).
    private static func invitationStore(_ configuration: ServerConfiguration) throws -> any InvitationStore {
        if let store = configuration.invitationStore { return store }
        guard configuration.backplane == nil, let directory = configuration.dataDirectory else { return InMemoryInvitationStore() }
        return try SQLiteInvitationStore(path: (directory as NSString).appendingPathComponent("invitations.sqlite"),
                                         fullSync: configuration.storeFullSync)
    }

    /// The bound port, once started.
    public var port: Int? { serverChannel.withLockedValue { $0?.localAddress?.port } }

    /// Connection handlers alive, open or not yet freed (tests: a closed connection frees its own).
    var liveConnectionHandlers: Int { hub.liveHandlers.load(ordering: .relaxed) }

    /// Connections the event loops' deadline sweeps watch (tests: closed ones leave).
    func watchedConnections() async throws -> Int {
        var total = 0
        for fanout in hub.fanouts { total += try await fanout.eventLoop.submit { fanout.liveness.count }.get() }
        return total
    }

    /// The admin listener's bound port, once started (nil when no `adminKey` is configured).
    public var adminPort: Int? { admin.port }

    /// Open client connections.
    public var connectionCount: Int { hub.openConnections.count }

    /// Logged-in MESSAGE connections, joined STREAM connections, and the PCU peak (K-2, K-3).
    public var connectionCounters: ConnectionCounters { hub.connectionCounters }

    /// Webhook delivery counters; nil without a webhook URL.
    public var webhookStats: WebhookStats? { hub.webhooks?.stats }

    /// Sessions (online, or offline within their grace window).
    public var sessionCount: Int { hub.sessionCount }

    /// The members of a channel as the server sees them (sorted user ids).
    public func members(appId: String, channel: String) -> [String] { hub.members(appId: appId, channel: channel) }

    /// Binds and starts accepting connections. Returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        let hub = self.hub
        let config = configuration
        let tls = self.tls
        let sockets = SocketBudget(configured: config.maxConnections), logger = self.logger
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: config.maxOutboundBytes / 2, high: config.maxOutboundBytes))
            .childChannelOption(.recvAllocator, value: Self.receiveBuffers)
            .childChannelInitializer { channel in
                // Past the socket budget: closed at once, before it costs anything (the client
                // tries another node or backs off); the node keeps serving the others.
                guard sockets.admit(warn: { refused in
                    logger.warning("connection refused: the server holds as many sockets as it may (maxConnections)",
                                   metadata: ["limit": "\(sockets.limit)", "refused": "\(refused)"])
                }) else { return channel.close() }
                channel.closeFuture.whenComplete { _ in sockets.release() }
                return channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        // The context current at the accept: a reload affects new connections only.
                        try channel.pipeline.syncOperations.addHandlers(
                            PlainTextOnTLSPortHandler(), NIOSSLServerHandler(context: tls.current))
                    }
                    try Self.configurePipeline(channel, hub: hub, config: config)
                }
            }
        try await hub.startBackplane()   // cluster mode: following before serving
        try await configuration.sharedServices?.start()   // cluster mode: metadata, history, locks
        hub.mailbox.startFollowing()   // cluster mode: other nodes' user messages
        hub.storage.followOtherNodes()   // cluster mode: other nodes' metadata changes
        hub.followLocks()   // cluster mode: other nodes' lock changes
        try await hub.restoreInvitations()   // the call invitations of the last run, before anyone can ask for them
        let channel = try await bootstrap.bind(host: config.host, port: config.port).get()
        hub.startTimers()   // sweeps, interval presence, history retention; cluster mode: due locks
        memoryTrimmer.start()
        serverChannel.withLockedValue { $0 = channel }
        let port = channel.localAddress?.port ?? config.port
        // Where the other nodes ask this one whether it reaches the database (plain HTTP /health:
        // not advertised by default when the client port speaks TLS).
        if let address = config.clusterAddress ?? (tls == nil ? Self.advertisedAddress(host: config.host, port: port) : nil) {
            configuration.backplane?.advertise(address: address)
        }
        logger.info("listening", metadata: ["host": "\(config.host)", "port": "\(port)", "tls": "\(tls != nil)"])
        if let key = config.adminKey, !key.isEmpty {
            let api = try AdminAPI(hub: hub, key: key, startedAt: Hub.wallMillis, node: "\(config.host):\(port)")
            let adminPort = try await admin.start(group: group, host: config.adminHost, port: config.adminPort, api: api,
                                                  idleTimeout: config.adminIdleTimeout, tls: adminTLS)
            logger.info("admin API listening", metadata: ["host": "\(config.adminHost)", "port": "\(adminPort)", "tls": "\(adminTLS != nil)"])
            if adminTLS == nil, !Self.isLoopback(config.adminHost) {
                logger.warning("the admin listener is reachable from the network over plain HTTP: the admin key crosses it in clear; give it a certificate (adminTLSCertificatePath, --admin-tls-cert) or listen on loopback",
                               metadata: ["host": "\(config.adminHost)"])
            }
        }
        return port
    }

    /// Reads the TLS certificate and key files again; connections accepted from now on use
    /// them, open ones keep theirs. A file that cannot be used is logged and thrown, and the
    /// current certificate stays. Does nothing without TLS. `rtm serve` calls it on SIGHUP.
    /// The admin listener's certificate (`adminTLSCertificatePath`) is reloaded the same way.
    public func reloadTLSCertificate() throws {
        // Each listener on its own: a broken client certificate must not keep the admin
        // listener's from being rotated (nor the reverse). The first failure is thrown after.
        var firstFailure: (any Error)?
        for tls in [tls, adminTLS].compactMap({ $0 }) {
            do {
                try tls.reload()
                logger.info("TLS certificate reloaded", metadata: ["certificate": "\(tls.certificatePath)"])
            } catch {
                logger.error("TLS certificate reload failed; keeping the current one",
                             metadata: ["certificate": "\(tls.certificatePath)", "error": "\(error)"])
                if firstFailure == nil { firstFailure = error }
            }
        }
        if let firstFailure { throw firstFailure }
    }

    /// Replaces the channel namespaces while the server runs (`rtm serve` on SIGHUP), keeping
    /// the default capability. See `reloadAccessRules`.
    public func reloadNamespaces(_ namespaces: [ChannelNamespace]) async throws(AuthorizationHookConfigurationError) {
        try await reloadAccessRules(namespaces: namespaces, defaultCapabilities: hub.accessRules.current.defaultCapabilities)
    }

    /// Replaces the channel namespaces and the default capability of sessions without a
    /// capability token while the server runs (`rtm serve` on SIGHUP). New sessions take them
    /// at once and so do open ones: every watch of a session is decided again, and what the new
    /// rules no longer allow ends as a narrower capability token's would (a subscription with an
    /// `unsubscribed` event, a part of one or another watch with `watchEnded`, a STREAM
    /// connection closed). A channel keeps the replay limits it was created with. Returns once
    /// every open connection has them. Throws, changing nothing, when a namespace asks the
    /// authorization hook and none is configured.
    public func reloadAccessRules(namespaces: [ChannelNamespace], defaultCapabilities: Capabilities?) async throws(AuthorizationHookConfigurationError) {
        if hub.authorizationHook == nil, let hooked = namespaces.first(where: { !$0.hooks.isEmpty }) {
            throw AuthorizationHookConfigurationError("namespace '\(hooked.pattern)' asks the authorization hook, but none is configured (--auth-hook)")
        }
        try? await hub.reloadAccessRules(.init(namespaces: namespaces, defaultCapabilities: defaultCapabilities)).get()
    }

    /// Replaces the per-connection rates while the server runs (`rtm serve` on SIGHUP): the
    /// publish rate and the error-reply budget, for new connections and open ones alike.
    /// Returns once every open connection has them; throws, changing nothing, when a value
    /// cannot be used.
    public func reloadLimits(_ limits: ConnectionLimits) async throws(ServerConfigurationError) {
        if let problem = limits.problem { throw ServerConfigurationError(problem) }
        try? await hub.reloadLimits(limits).get()
    }

    /// Points the webhooks at a new URL and secret while the server runs (`rtm serve` on
    /// SIGHUP); events still queued go to the new one. Throws, changing nothing, when the URL or
    /// secret cannot be used, or the server was started without webhooks (turning them on or
    /// off takes a restart).
    public func reloadWebhook(url: String, secret: String) throws(ServerConfigurationError) {
        guard let webhooks = hub.webhooks else {
            throw ServerConfigurationError("the server was started without webhooks; turning them on takes a restart")
        }
        try webhooks.retarget(url: url, secret: secret)
    }

    /// Whether `host` names the loopback interface only.
    /// "host:port" the other nodes reach this one at: the listening host, or the host name when
    /// it listens on every interface (IPv6 literals in brackets).
    static func advertisedAddress(host: String, port: Int) -> String {
        let name = ["", "0.0.0.0", "::", "*"].contains(host) ? ProcessInfo.processInfo.hostName : host
        return name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)"
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    private static func configurePipeline(_ channel: any Channel, hub: Hub, config: ServerConfiguration) throws {
        let checks = NIOWebSocketServerUpgrader(
            maxFrameSize: config.limits.maxFrameBytes,
            automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                // Versioning: the client must offer our subprotocol; we choose it. A request that
                // is refused goes on to `NotUpgradedHandler`, which names its problem (or answers
                // 503 while draining: no new WebSocket).
                guard !hub.isDraining, head.uri.split(separator: "?").first.map(String.init) == FrameCodec.path,
                      ServerUpgrader.refusal(for: head) == nil else {
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                return channel.eventLoop.makeSucceededFuture(HTTPHeaders([("Sec-WebSocket-Protocol", FrameCodec.subprotocol)]))
            },
            upgradePipelineHandler: { channel, _ in channel.eventLoop.makeSucceededVoidFuture() })
        let upgrader = ServerUpgrader(checks: checks, maxFrameSize: config.limits.maxFrameBytes, hub: hub)
        let sync = channel.pipeline.syncOperations
        // Pre-encoded frames (fan-out, replay) are written from here, below the frame encoder.
        try sync.addHandler(RawOutboundHandler(), name: rawHandlerName)
        try sync.configureHTTPServerPipeline(withServerUpgrade: (
            upgraders: [upgrader],
            // Upgraded: the plain-HTTP answerer must not see WebSocket bytes.
            completionHandler: { context in
                context.pipeline.syncOperations.removeHandler(name: notUpgradedHandlerName, promise: nil)
            }
        ), withErrorHandling: false)   // `NotUpgradedHandler` answers a malformed request (NIO's 400 has no body)
        try sync.addHandler(NotUpgradedHandler(hub: hub), name: notUpgradedHandlerName)
        // From the accept to the close: the connection's state, its deadlines, its requests.
        try sync.addHandler(ConnectionHandler(hub: hub, loop: channel.eventLoop))
    }

    /// Stops accepting, tells every client to go away (`goaway`), waits up to `shutdownGrace`
    /// for them to close, closes the rest, and stops the event loops.
    public func shutdown() async throws {
        let channel = serverChannel.withLockedValue { value in defer { value = nil }; return value }
        guard let channel else { return }
        try? await channel.close()
        await admin.stop()
        let connections = hub.openConnections
        let goAway = Frame(type: .goAway, code: LinkStateChangeReason.kickedOutByServer.rawValue, reason: "server shutting down")
        for connection in connections { Hub.close(connection, with: goAway, code: .goingAway, reason: "server shutting down") }
        hub.metrics.sentGoAways(connections.count)
        let deadline = NIODeadline.now() + configuration.shutdownGrace
        for connection in connections {
            let closed = connection.channel.closeFuture
            let timeout = group.next().scheduleTask(deadline: deadline) { connection.channel.close(promise: nil) }
            try? await closed.get()
            timeout.cancel()
        }
        // Each step bounded: a stop that never returns (a database call stuck in a driver)
        // must not keep the process from exiting on SIGTERM.
        let bound = configuration.shutdownGrace + .seconds(5)
        await Self.bounded(bound, "cluster events", logger) {   // while the pools are up
            await self.hub.nodeLink.stop()
            self.hub.modify { $0.invitationRepliesStopped() }   // requests whose events did not come back
            await self.hub.streams.settle()   // the stream channel leaves reach the other nodes (≤ 2 s)
        }
        await Self.bounded(bound, "user messages", logger) {
            await self.hub.mailbox.drain()
            await self.hub.mailbox.stopFollowing()
        }
        await Self.bounded(bound, "storage", logger) { await self.hub.storage.drain() }
        await Self.bounded(bound, "invitations", logger) { await self.hub.invitationWriter.drain() }
        await Self.bounded(bound, "locks and metadata", logger) {
            await self.hub.locks.stop()
            await self.configuration.sharedServices?.stop()
        }
        await Self.bounded(bound, "webhooks", logger) { await self.hub.webhooks?.stop() }   // what is queued stays on disk
        await Self.bounded(bound, "cluster backplane", logger) { await self.configuration.backplane?.stop() }
        memoryTrimmer.stop()
        try await group.shutdownGracefully()
        logger.info("stopped")
    }

    /// Runs `body`, waiting for it at most `limit`; past it the shutdown goes on without it.
    static func bounded(_ limit: TimeAmount, _ what: String, _ logger: Logger, _ body: @escaping @Sendable () async -> Void) async {
        let finished = NIOLockedValueBox(false)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            @Sendable func finish() {
                if finished.withLockedValue({ done in defer { done = true }; return !done }) { continuation.resume() }
            }
            Task {
                await body()
                finish()
            }
            Task {
                try? await Task.sleep(nanoseconds: UInt64(limit.nanoseconds))
                if !finished.withLockedValue({ $0 }) { logger.error("shutdown: a step did not finish in time; going on", metadata: ["step": "\(what)"]) }
                finish()
            }
        }
    }

    /// ServiceLifecycle: start, wait for graceful shutdown, drain (paced `goaway`, `drain()`),
    /// shut down.
    public func run() async throws {
        try await start()
        try? await gracefulShutdown()
        await drain()
        try await shutdown()
    }
}

/// Marks the place in the pipeline, next to the socket, where pre-encoded WebSocket frames are
/// written; it passes everything through.
final class RawOutboundHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny
}

@available(*, unavailable)
extension RawOutboundHandler: Sendable {}

/// Tells the `ConnectionHandler` that a plain HTTP request was answered and the socket closes.
struct HTTPAnsweredEvent: Sendable {}
