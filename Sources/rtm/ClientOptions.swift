import ArgumentParser
import Foundation
import RTMAuth
import RTMClient

/// Options shared by the client commands.
struct ClientOptions: ParsableArguments {
    @Option(help: "Server URL: ws://host:port, or wss://host:port for TLS; several endpoints of one service comma-separated (ws://a:9600,ws://b:9600): tried in a shuffled order, failing over.") var url = "ws://127.0.0.1:9600"
    @Option(help: "For wss://: PEM file of the CA certificates to trust instead of the system trust store.") var caFile: String?
    @Option(help: "User id to log in as (default: a random cli-XXXX).") var user: String?
    @Option(help: "Login token (default: minted from the app certificate).") var token: String?
    @Option(help: "Capability token limiting what the session may do (a JWT from `rtm token --capability`).") var capability: String?
    @Option(help: "App id (default: the data directory's development app).") var appId: String?
    @Option(help: "App certificate, to mint a token when --token is not given.") var appCertificate: String?
    @Option(help: "Data directory holding the development app.") var dataDir = "rtm-data"
    @Option(help: "Heartbeat interval in seconds [5, 1800].") var heartbeat: Double = 5
    @Option(help: "Presence timeout in seconds [5, 300].") var presenceTimeout: Double = 15
    @Option(help: .hidden) var pongTimeout: Double = 10
    /// Lets tests run the CLI with millisecond timers (heartbeat, presence timeout, pong timeout).
    @Flag(help: .hidden) var allowTestTimings = false

    /// A logged-in client, ready to use. With `printEvents`, every event is printed; each is
    /// then passed on to `afterPrinting`, so that a command that ends on an event it reads there
    /// has printed that event's line before it exits (two separate event streams race).
    func connect(printEvents: Bool, afterPrinting printed: AsyncStream<RTMEvent>.Continuation? = nil) async throws -> RTMClient {
        let (appId, certificate) = try Credentials.resolve(appId: appId, appCertificate: appCertificate, dataDir: dataDir)
        let userId = user ?? "cli-\(DevCredentials.randomHex(4))"
        var config = RTMClientConfig(appId: appId, userId: userId, endpoint: url)
        let endpoints = url.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if endpoints.count > 1 { config.endpoints = endpoints }
        config.heartbeatInterval = heartbeat
        config.caFile = caFile
        config.presenceTimeout = presenceTimeout
        config.pongTimeout = pongTimeout
        if allowTestTimings {
            config.allowTestTimings = true
            config.backoffInitial = min(config.backoffInitial, heartbeat)
            config.backoffMax = min(config.backoffMax, heartbeat * 4)
            config.connectTimeout = min(config.connectTimeout, pongTimeout * 3)
        }
        let client = try RTMClient(config: config)
        if printEvents {
            let events = client.events()
            Task {
                for await event in events {
                    EventPrinter.print(event)
                    printed?.yield(event)
                }
                printed?.finish()
            }
        }
        var token = self.token
        if token == nil, let certificate {
            token = AccessToken006.buildRTMToken(appId: appId, appCertificate: certificate, userId: userId,
                                                 privilegeExpireTimestamp: UInt32(Date().timeIntervalSince1970) + 24 * 3600)
        }
        try await client.login(token: token, capability: capability)
        return client
    }
}

enum EventPrinter {
    static func print(_ event: RTMEvent) {
        let line: String
        switch event {
        case .linkState(let e): line = "link      \(e)"
        case .connectionState(let state, let reason): line = "classic   \(state)(\(state.rawValue)) reason=\(reason)(\(reason.rawValue))"
        case .message(let m):
            let body = m.text ?? m.data.map { "<\($0.count) bytes>" } ?? ""
            switch m.channelType {
            case .user: line = "message   from \(m.publisher) (user, id \(m.seq ?? 0)): \(body)"
            case .stream: line = "message   #\(m.channelName)/\(m.topic ?? "") from \(m.publisher): \(body)"
            case .message: line = "message   #\(m.channelName) seq=\(m.seq ?? 0) from \(m.publisher): \(body)"
            }
        case .presence(let p):
            switch p.kind {
            case .snapshot: line = "presence  #\(p.channelName) snapshot \(p.members)\(p.states.isEmpty ? "" : " states=\(p.states)")"
            case .interval: line = "presence  #\(p.channelName) interval joined=\(p.members) left=\(p.left) timedOut=\(p.timedOut) changed=\(p.states)"
            case .remoteStateChanged: line = "presence  #\(p.channelName) remoteStateChanged \(p.userId) \(p.state)"
            default: line = "presence  #\(p.channelName) \(p.kind.rawValue) \(p.userId)"
            }
        case .member(let m):
            switch m {
            case .joined(let channel, let user): line = "member    #\(channel) memberJoined \(user)"
            case .left(let channel, let user): line = "member    #\(channel) memberLeft \(user)"
            case .count(let channel, let count): line = "member    #\(channel) memberCount \(count)"
            }
        case .tokenExpired: line = "token     expired: renew it to go on reconnecting"
        case .gap(let g): line = "gap       #\(g.channelName) lost \(g.lostCount.map(String.init) ?? "an unknown number of") message(s) that could not be replayed"
        case .userMessagesDropped(let count): line = "dropped   \(count) user message(s) waiting for you (cap or age limit)"
        case .userMessageEpochChanged(let epoch): line = "epoch     user messages now in mailbox epoch \(epoch): some sent to you just before may be lost (the store failed over)"
        case .tokenWillExpire(let channel): line = "token     will expire in 30 s\(channel.map { " (stream channel \($0))" } ?? ""): renew it"
        case .storage(let e):
            let items = e.metadata.items.map { "\($0.key)=\($0.value)@\($0.revision)" }.joined(separator: " ")
            line = "storage   \(e.storageType.rawValue) \(e.target) \(e.kind.rawValue) rev=\(e.metadata.majorRevision) \(items)"
        case .lock(let e):
            let locks = e.locks.map { "\($0.lockName)(owner=\($0.owner.isEmpty ? "-" : $0.owner) ttl=\($0.ttl) fence=\($0.fencingToken))" }.joined(separator: " ")
            line = "lock      #\(e.channelName) \(e.kind.rawValue) \(locks)"
        case .topic(let e):
            let topics = e.topics.map { "\($0.topic)[\($0.publishers.map(\.userId).joined(separator: ","))]" }.joined(separator: " ")
            line = "topic     #\(e.channelName) \(e.kind.rawValue) \(e.userId) \(topics)"
        case .call(.local(let i)):
            line = "call      to \(i.calleeId) [\(i.id)] \(i.state)(\(i.state.rawValue))"
                + (i.response.map { " response=\($0)" } ?? "") + (i.error.map { " error=\($0)(\($0.rawValue))" } ?? "")
        case .call(.remote(let i)):
            line = "call      from \(i.callerId) [\(i.id)] \(i.state)(\(i.state.rawValue))"
                + (i.state == .invitationReceived ? " content=\(i.content)\(i.channelId.map { " channel=\($0)" } ?? "")" : "")
                + (i.error.map { " error=\($0)(\($0.rawValue))" } ?? "")
        case .unsubscribed(let e): line = "unsubscribed #\(e.channelName) by the server: \(e.reason) (\(e.code.rawValue))"
        case .watchEnded(let e):
            let subject = [e.channelName.map { "#\($0)" }, e.userId, e.topic.map { "topic \($0)" }].compactMap { $0 }.joined(separator: " ")
            line = "watch ended (\(e.kind?.rawValue ?? "unknown") \(subject)) by the server: \(e.reason) (\(e.code.rawValue))"
        case .peersOnlineStatus(let statuses):
            line = "online    " + statuses.map { "\($0.userId)=\($0.state)(\($0.state.rawValue))" }.joined(separator: " ")
        }
        let stamp = ISO8601DateFormatter.string(from: Date(), timeZone: .current, formatOptions: [.withTime, .withColonSeparatorInTime, .withFractionalSeconds])
        say("[\(stamp)] \(line)")
    }

    /// Prints a line unbuffered, so a watcher (or a test reading a pipe) sees it at once, in order
    /// with the events (`print` buffers when the output is not a terminal).
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data("\(line)\n".utf8))
    }
}

/// Ctrl-C (SIGINT) and SIGTERM for the commands that run until interrupted: the first signal
/// makes `wait()` return (the command then logs out and exits 0); a second one, or a logout that
/// takes longer than `grace`, exits at once with 130.
///
/// Why a handler of our own and not a dispatch signal source: a dispatch source needs the
/// signal's disposition set to `SIG_IGN`, and on Linux libdispatch blocks the signal only on its
/// own thread, so a signal the kernel hands to another thread is discarded. A background job of a
/// non-interactive shell also starts with SIGINT ignored (`cmd & kill -INT $!` did nothing).
/// `install()` sets a real handler, whatever the inherited disposition, that writes the signal
/// number into a pipe (async-signal-safe); a thread reads the pipe.
enum Interrupt {
    /// The pipe's write end, for the handler. Set before the handler is installed.
    nonisolated(unsafe) private static var pipeWriteEnd: Int32 = -1
    /// How long the logout after the first signal may take before the process exits anyway.
    static let grace: Duration = .seconds(5)
    private static let received: AsyncStream<Int32> = {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { fatalError("pipe: errno \(errno)") }
        pipeWriteEnd = fds[1]
        let readEnd = fds[0]
        let reader = Thread {
            var count = 0
            var byte: UInt8 = 0
            while read(readEnd, &byte, 1) == 1 {
                count += 1
                if count > 1 { _exit(130) }
                continuation.yield(Int32(byte))
                DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(grace.components.seconds))) { _exit(130) }
            }
        }
        reader.name = "rtm-signals"
        reader.start()
        for sig in [SIGINT, SIGTERM] {
            signal(sig) { sig in
                var byte = UInt8(truncatingIfNeeded: sig)
                _ = write(Interrupt.pipeWriteEnd, &byte, 1)
            }
        }
        return stream
    }()

    /// Catches SIGINT and SIGTERM from now on (call it before connecting, so a Ctrl-C during the
    /// login is not lost). Idempotent.
    static func install() { _ = received }

    /// Returns at the first SIGINT or SIGTERM (installing the handlers if needed).
    static func wait() async {
        for await _ in received { return }
    }

    /// Waits for SIGINT/SIGTERM, then logs out (an intentional leave).
    static func logoutOnSignal(_ client: RTMClient) async {
        await wait()
        await client.logout()
    }
}
