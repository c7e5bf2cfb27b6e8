import Foundation
import Logging
import NIOCore
import RTMAuth
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// A real server on 127.0.0.1:0 with test timings (milliseconds), and helpers to make real
/// clients for it, optionally through a fault proxy.
struct Harness {
    static let appId = "0123456789abcdef0123456789abcdef"
    static let certificate = "fedcba9876543210fedcba9876543210"

    let server: RTMServer
    let port: Int

    /// Server timings shrunk for tests: slack 200 ms, so a client with a 100 ms heartbeat is
    /// declared lost 300 ms after its last frame, then gets its presence grace.
    static func serverConfig(port: Int = 0) -> ServerConfiguration {
        var config = ServerConfiguration()
        config.port = port
        config.apps = [appId: certificate]
        config.heartbeatSlack = .milliseconds(200)
        config.heartbeatRange = 0.01...1800
        config.presenceTimeoutRange = 0.01...300
        config.loginDeadline = .seconds(2)
        config.shutdownGrace = .milliseconds(300)
        config.livenessCheckInterval = .milliseconds(10)
        config.publishRatePerSecond = 0
        config.threads = 2
        return config
    }

    /// Starts a server shaped by `configure`. The test's scope (`TestResources`, which the
    /// `.realTime` trait gives every test) stops it when the test ends, whatever it threw: a
    /// test needs no trailing `stop()`, and calls `stop()` only to stop it part way.
    static func start(_ configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> Harness {
        var config = serverConfig()
        configure(&config)
        var logger = Logger(label: "test.server")
        logger.logLevel = .warning
        let server = try RTMServer(configuration: config, logger: logger)
        let port = try await server.start()
        TestResources.register { try? await server.shutdown() }   // stopped when the test ends, whatever it threw
        return Harness(server: server, port: port)
    }

    func stop() async {
        try? await server.shutdown()
    }

    static func token(_ user: String, expiresIn: Int = 3600) -> String {
        AccessToken006.buildRTMToken(appId: appId, appCertificate: certificate, userId: user,
                                     privilegeExpireTimestamp: UInt32(clamping: Int(Date().timeIntervalSince1970) + expiresIn))
    }

    /// Client timings shrunk for tests.
    static func clientConfig(_ user: String, port: Int) -> RTMClientConfig {
        var config = RTMClientConfig(appId: appId, userId: user, endpoint: "ws://127.0.0.1:\(port)")
        config.allowTestTimings = true
        config.heartbeatInterval = 0.1
        config.pongTimeout = 0.3
        config.presenceTimeout = 0.6
        config.loginTimeout = 3
        config.requestTimeout = 2
        config.connectTimeout = 0.5
        config.backoffInitial = 0.05
        config.backoffMax = 0.2
        config.interruptionThreshold = 0.4
        config.disconnectedWindow = 30
        config.suspendedRetryInterval = 0.5
        config.closeTimeout = 0.2
        return config
    }

    /// A client with recorded events, logged in.
    static func client(_ user: String, port: Int, configure: (inout RTMClientConfig) -> Void = { _ in }, login: Bool = true) async throws -> (RTMClient, AsyncRecorder<RTMEvent>) {
        var config = clientConfig(user, port: port)
        configure(&config)
        var logger = Logger(label: "test.client.\(user)")
        logger.logLevel = .warning
        let client = try RTMClient(config: config, logger: logger)
        let recorder = AsyncRecorder(client.events())
        if login { try await client.login(token: token(user)) }
        return (client, recorder)
    }
}

extension RTMEvent {
    var link: LinkStateEvent? { if case .linkState(let e) = self { e } else { nil } }
    var classic: ConnectionState? { if case .connectionState(let s, _) = self { s } else { nil } }
    var messageEvent: MessageEvent? { if case .message(let m) = self { m } else { nil } }
    var presenceEvent: PresenceEvent? { if case .presence(let p) = self { p } else { nil } }

    /// Matches presence events of `user` of one of `kinds`.
    static func isPresence(of user: String, _ kinds: Set<PresenceEventKind>) -> @Sendable (RTMEvent) -> Bool {
        { event in
            guard let presence = event.presenceEvent else { return false }
            return presence.userId == user && kinds.contains(presence.kind)
        }
    }
    var memberEvent: MemberEvent? { if case .member(let m) = self { m } else { nil } }
}

/// The default wait for something that should happen promptly.
let soon: Duration = .seconds(5)
/// The longest a started `rtm serve` (or other) process may take to say it is listening: a
/// bound, not a wait (the wait ends at the line). Loading a 100 MB debug binary and opening a
/// data directory took more than `soon` while this machine's disk stalled.
let processStart: Duration = .seconds(20)

