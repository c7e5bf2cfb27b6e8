import Foundation
import NIOCore
import RTMAuth
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// The authorization hook end to end: a real server asks a real HTTP backend (`HookBackend`)
/// about logins, subscribes and publishes, and SDK and raw clients over real sockets get its
/// decisions (-10104 notPermitted with the backend's reason), its rewrites, its failure modes
/// and its circuit breaker.
@Suite(.realTime, .serialized)
struct AuthHookTests {
    static let secret = "hook-secret"

    static func start(_ backend: HookBackend, namespaces: [String], configure: (inout AuthorizationHookConfiguration) -> Void = { _ in })
        async throws -> Harness {
        let parsed = try namespaces.map { try ChannelNamespace(parsing: $0) }
        return try await Harness.start { config in
            var hook = AuthorizationHookConfiguration(url: backend.url, secret: Self.secret)
            configure(&hook)
            config.authorizationHook = hook
            config.namespaces = parsed
        }
    }

    /// A client whose link a busy machine does not drop (1 s heartbeats, 5 s to answer one):
    /// these tests count the hook's questions and decisions, to which a reconnection would add
    /// (its restored subscriptions are asked again).
    static func steadyClient(_ user: String, port: Int, login: Bool = true) async throws -> (RTMClient, AsyncRecorder<RTMEvent>) {
        try await Harness.client(user, port: port, configure: { $0.heartbeatInterval = 1; $0.pongTimeout = 5 }, login: login)
    }

    /// The value of the hook's counter for `event` and `outcome` in a scrape.
    static func hookCount(_ scrape: MetricsTests.Scrape, _ event: String, _ outcome: String) -> Double {
        scrape.values.first { $0.key.hasPrefix("rtm_auth_hook_requests_total") && $0.key.contains(#"event="\#(event)""#)
            && $0.key.contains(#"outcome="\#(outcome)""#) }?.value ?? 0
    }

    @Test("subscribe hook: allowed and denied (the backend's reason, -10104), channels outside the namespace not asked, a decision reused")
    func subscribeAllowDeny() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { question in
            question.channel == "room.secret" ? .json(#"{"result":"deny","reason":"members only"}"#) : .json(#"{"result":"allow"}"#)
        }
        let harness = try await Self.start(backend, namespaces: ["room.*:hook-subscribe"])
        let (alice, _) = try await Self.steadyClient("alice", port: harness.port)
        _ = try await alice.subscribe("room.a")
        let refused = await CapabilityTests.code { _ = try await alice.subscribe("room.secret") }
        #expect(refused == .notPermitted)
        do {
            _ = try await alice.subscribe("room.secret")
        } catch {
            #expect(error.reason.contains("members only"), "\(error.reason)")
        }
        _ = try await alice.subscribe("lobby")
        try await alice.unsubscribe("room.a")
        _ = try await alice.subscribe("room.a")   // kept: not asked again
        let questions = backend.received
        #expect(questions.map(\.channel) == ["room.a", "room.secret"], "\(questions.map(\.channel))")
        #expect(questions.allSatisfy { $0.signatureValid && $0.event == "subscribe" && $0.userId == "alice" && $0.channelType == "message" })
        let scrape = try await MetricsTests.scrape(harness.port)
        #expect(Self.hookCount(scrape, "subscribe", "allow") == 1)
        #expect(Self.hookCount(scrape, "subscribe", "deny") == 1)
        #expect(Self.hookCount(scrape, "subscribe", "cached") == 2)
        await alice.logout()
    }

    @Test("connect hook: a denied login fails with the backend's reason; an allowed one takes the grants the backend sets")
    func connectGrants() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { question in
            switch question.userId {
            case "mallory": .json(#"{"result":"deny","reason":"account suspended"}"#)
            default: .json(#"{"result":"allow","capability":{"channels":{"room.*":["subscribe"]}}}"#)
            }
        }
        let harness = try await Self.start(backend, namespaces: []) { $0.connect = .closed }
        let (mallory, _) = try await Self.steadyClient("mallory", port: harness.port, login: false)
        do {
            try await mallory.login(token: Harness.token("mallory"))
            Issue.record("mallory logged in")
        } catch {
            #expect(error.code == .notPermitted && error.reason.contains("account suspended"), "\(error)")
        }
        let (bob, _) = try await Self.steadyClient("bob", port: harness.port)
        _ = try await bob.subscribe("room.a")
        #expect(await CapabilityTests.code { _ = try await bob.publish(channel: "room.a", message: "hi") } == .notPermitted)
        #expect(await CapabilityTests.code { _ = try await bob.subscribe("lobby") } == .notPermitted)
        #expect(backend.received.map(\.event) == ["connect", "connect"])
        await bob.logout()
    }

    @Test("publish hook on pipelined requests: each asked in turn, rewritten or refused, and every reply and delivery in the client's order")
    func publishOrder() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { question in
            switch question.payload {
            case "bad": .json(#"{"result":"allow","payload":"***"}"#)
            case "forbidden": .json(#"{"result":"deny","reason":"no such words"}"#)
            default: .json(#"{"result":"allow"}"#)   // a publish's decision is not kept unless the answer says
            }
        }
        let harness = try await Self.start(backend, namespaces: ["chat.*:hook-publish"])
        let client = try await JSONPublishTests.RawClient(port: harness.port)
        let login = Frame(type: .login, id: 1, appId: Harness.appId, userId: "alice", token: Harness.token("alice"), heartbeatInterval: 5)
        try await client.send([JSONPublishTests.text(String(buffer: FrameCodec.encode(login)))])
        _ = try await client.waitFor { $0.contains { String(buffer: $0.payload).contains(#""id":1"#) } }
        try await client.send([JSONPublishTests.text(#"{"type":"subscribe","id":2,"channel":"chat.a","withPresence":false}"#)])
        let before = try await client.waitFor { $0.contains { String(buffer: $0.payload).contains(#""id":2"#) } }.count

        var binary = ByteBuffer()
        BinaryFrame.writePublish(into: &binary, requestID: 99, msgId: nil, channel: "chat.a", customType: nil, isText: true, payload: Array("m3".utf8))
        try await client.send([
            JSONPublishTests.text(#"{"type":"publish","id":10,"channel":"chat.a","text":"m0"}"#),
            JSONPublishTests.text(#"{"type":"publish","id":11,"channel":"chat.a","text":"bad"}"#),
            JSONPublishTests.text(#"{"type":"publish","id":12,"channel":"chat.a","text":"forbidden"}"#),
            JSONPublishTests.clientFrame(0x2, Array(binary.readableBytesView), key: [5, 6, 7, 8]),
            JSONPublishTests.text(#"{"type":"whoNow","id":14,"channel":"chat.a"}"#),
            JSONPublishTests.text(#"{"type":"publish","id":15,"channel":"chat.a","text":"m5","storeInHistory":true}"#),
        ])
        let frames = try await client.waitFor { $0.contains { String(buffer: $0.payload).contains(#""id":15"#) } }.dropFirst(before)
        let replies = frames.filter { $0.opcode == 0x1 }.compactMap { try? FrameCodec.decode($0.payload) }.filter { $0.id != nil }
        #expect(replies.map(\.id) == [10, 11, 12, 14, 15], "\(replies.map { "\($0.id ?? 0) \($0.type) \($0.reason ?? "")" })")
        #expect(replies.first { $0.id == 12 }?.code == RTMErrorCode.notPermitted.rawValue)
        #expect(replies.first { $0.id == 12 }?.reason?.contains("no such words") == true)
        var delivered: [String] = []
        var acks: [UInt64] = []
        for frame in frames where frame.opcode == 0x2 {
            switch try BinaryFrame.decode(frame.payload) {
            case .messages(let messages): delivered += messages.map { String(buffer: $0.payload) }
            case .publishAcks(let a): acks += a.map(\.requestID)
            default: break
            }
        }
        for frame in frames where frame.opcode == 0x1 {
            if let message = try? FrameCodec.decode(frame.payload), message.type == .message, let text = message.text { delivered.append(text) }
        }
        #expect(delivered == ["m0", "***", "m3", "m5"], "\(delivered)")
        #expect(acks == [99])
        #expect(backend.received.compactMap(\.payload) == ["m0", "bad", "forbidden", "m3", "m5"])
        #expect(backend.received.allSatisfy { $0.event == "publish" && $0.signatureValid })
        try? await client.channel.close()
    }

    @Test("a publish decision kept for the cacheSeconds its answer gives: a run of publishes asks once")
    func publishDecisionKept() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { _ in .json(#"{"result":"allow","cacheSeconds":60}"#) }
        let harness = try await Self.start(backend, namespaces: ["chat.*:hook-publish"])
        let (alice, _) = try await Self.steadyClient("alice", port: harness.port)
        for index in 0..<20 { _ = try await alice.publish(channel: "chat.a", message: "m\(index)") }
        #expect(backend.received.count == 1)
        let scrape = try await MetricsTests.scrape(harness.port)
        #expect(Self.hookCount(scrape, "publish", "allow") == 1)
        #expect(Self.hookCount(scrape, "publish", "cached") >= 1)
        await alice.logout()
    }

    @Test("at most maxConcurrentRequests questions at the backend at once: a burst of subscribes waits its turn, every one decided")
    func concurrencyBounded() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { _ in .delayed(#"{"result":"allow"}"#, .milliseconds(50)) }
        let harness = try await Self.start(backend, namespaces: ["room.*:hook-subscribe"]) {
            $0.maxConcurrentRequests = 2
            $0.timeout = .seconds(5)
        }
        var clients: [RTMClient] = []
        for index in 0..<6 { clients.append(try await Self.steadyClient("user\(index)", port: harness.port).0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { _ = try await client.subscribe("room.a") } }
            try await group.waitForAll()
        }
        #expect(backend.received.count == 6)
        #expect(backend.mostAtOnce <= 2, "\(backend.mostAtOnce) at once")
        for client in clients { await client.logout() }
    }

    @Test("a backend that does not answer in time: refused where the namespace fails closed, allowed where it fails open")
    func timeoutFailureModes() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { _ in .silent }
        let harness = try await Self.start(backend, namespaces: ["closed.*:hook-subscribe", "open.*:hook-subscribe,hook-fail-open"]) {
            $0.timeout = .milliseconds(200)
            $0.breakerFailures = 100
        }
        let (alice, _) = try await Self.steadyClient("alice", port: harness.port)
        _ = try await alice.subscribe("open.a")
        do {
            _ = try await alice.subscribe("closed.a")
            Issue.record("subscribed to closed.a")
        } catch {
            #expect(error.code == .notPermitted && error.reason.contains("could not be asked"), "\(error)")
        }
        // The connection goes on: its next request runs.
        #expect(try await alice.publish(channel: "open.a", message: "still here") > 0)
        let scrape = try await MetricsTests.scrape(harness.port)
        #expect(Self.hookCount(scrape, "subscribe", "failed") == 2)
        await alice.logout()
    }

    @Test("the circuit breaker opens after repeated failures (the backend is no longer asked) and closes once it answers again")
    func breakerOpensAndCloses() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { _ in .status(500) }
        let harness = try await Self.start(backend, namespaces: ["room.*:hook-subscribe"]) {
            $0.breakerFailures = 2
            $0.breakerOpenFor = .milliseconds(300)
            $0.cacheTTL = .zero
        }
        let (alice, _) = try await Self.steadyClient("alice", port: harness.port)
        for channel in ["room.a", "room.b"] {
            #expect(await CapabilityTests.code { _ = try await alice.subscribe(channel) } == .notPermitted)
        }
        #expect(backend.received.count == 2)
        do {
            _ = try await alice.subscribe("room.c")
        } catch {
            #expect(error.reason.contains("circuit breaker"), "\(error.reason)")
        }
        #expect(backend.received.count == 2, "asked while the breaker was open")
        #expect(try await MetricsTests.scrape(harness.port)["rtm_auth_hook_breaker_open"] == 1)
        // The backend recovers: once the breaker lets a trial through, requests are decided again.
        backend.answer.withLockedValue { $0 = { _ in .json(#"{"result":"allow"}"#) } }
        let subscribed = await eventually(within: .seconds(5), every: .milliseconds(50)) {
            await CapabilityTests.code { _ = try await alice.subscribe("room.d") } == nil
        }
        #expect(subscribed)
        #expect(try await MetricsTests.scrape(harness.port)["rtm_auth_hook_breaker_open"] == 0)
        #expect(backend.received.count == 3, "one trial, then decided")
        await alice.logout()
    }

    @Test("a STREAM join in a subscribe-hooked namespace is asked too (channelType stream)")
    func streamJoin() async throws {
        let backend = try await HookBackend.start(secret: Self.secret) { question in
            question.channel == "live.closed" ? .json(#"{"result":"deny"}"#) : .json(#"{"result":"allow"}"#)
        }
        let harness = try await Self.start(backend, namespaces: ["live.*:hook-subscribe"])
        let (alice, _) = try await Self.steadyClient("alice", port: harness.port)
        let open = try alice.createStreamChannel("live.open")
        _ = try await open.join()
        let closed = try alice.createStreamChannel("live.closed")
        #expect(await CapabilityTests.code { _ = try await closed.join() } == .notPermitted)
        #expect(backend.received.map(\.channelType) == ["stream", "stream"])
        await open.leave()
        await alice.logout()
    }

    @Test("a namespace that asks the hook needs one configured: the server refuses to start, saying so")
    func hookNamespaceNeedsHook() throws {
        var config = Harness.serverConfig()
        config.namespaces = [try ChannelNamespace(parsing: "room.*:hook-publish")]
        #expect(throws: AuthorizationHookConfigurationError.self) { _ = try RTMServer(configuration: config) }
    }
}

/// The README's sample backend (`Examples/AuthHook/backend.py`), run as a real process and
/// asked by a real server: what the README says it does, it does.
@Suite(.realTime, .serialized)
struct AuthHookSampleTests {
    @Test("the README's sample hook backend: a banned login refused, vip.* for VIPs only, a publish rewritten; the README shows the file as it is",
          .enabled(if: runsWhen(python3 != nil, orRequiredBy: "RTM_PYTHON_CHECKS"), "needs python3"))
    func sampleBackend() async throws {
        let path = "\(packageRoot)/Examples/AuthHook/backend.py"
        let sample = try String(contentsOfFile: path, encoding: .utf8)
        let readme = try String(contentsOfFile: "\(packageRoot)/README.md", encoding: .utf8)
        #expect(readme.contains("```python\n" + sample + "```"), "README.md's sample backend differs from \(path)")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(python3))
        process.arguments = [path, "0"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice   // not the runner's: its output would stay open
        try process.run()
        // SIGKILL: the child inherits the test runner's blocked signals, so SIGTERM would not end it.
        defer { _ = Foundation.kill(process.processIdentifier, SIGKILL) }
        let firstLine = try #require(output.fileHandleForReading.availableData.split(separator: UInt8(ascii: "\n")).first)
        let port = try #require(Int(String(decoding: firstLine, as: UTF8.self)))

        let harness = try await Harness.start { config in
            var hook = AuthorizationHookConfiguration(url: "http://127.0.0.1:\(port)/", secret: "s3cret", connect: .closed)
            hook.timeout = .seconds(5)
            config.authorizationHook = hook
            config.namespaces = [try! ChannelNamespace(parsing: "vip.*:hook-subscribe"), try! ChannelNamespace(parsing: "chat.*:hook-publish")]
        }
        let (mallory, _) = try await AuthHookTests.steadyClient("mallory", port: harness.port, login: false)
        #expect(await CapabilityTests.code { try await mallory.login(token: Harness.token("mallory")) } == .notPermitted)
        let (alice, events) = try await AuthHookTests.steadyClient("alice", port: harness.port)
        let (bob, _) = try await AuthHookTests.steadyClient("bob", port: harness.port)
        _ = try await alice.subscribe("vip.lounge")
        #expect(await CapabilityTests.code { _ = try await bob.subscribe("vip.lounge") } == .notPermitted)
        _ = try await alice.subscribe("chat.general")
        _ = try await bob.publish(channel: "chat.general", message: "darn it")
        let message = await events.first(within: .seconds(5)) { event in
            if case .message(let m) = event, m.channelName == "chat.general" { return true }
            return false
        }
        guard case .message(let delivered)? = message else { Issue.record("no message"); return }
        #expect(delivered.text == "d**n it")
        await alice.logout()
        await bob.logout()
        await harness.stop()
    }
}
