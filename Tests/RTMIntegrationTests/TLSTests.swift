import Foundation
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// `wss://` with a certificate made at test time; a plain client to the TLS
/// port and a client that does not trust the CA fail at once with a typed error; a reload swaps
/// the certificate for new connections only.
@Suite(.realTime, .serialized, .enabled(if: runsWhen(program(named: "openssl") != nil, orRequiredBy: "RTM_REQUIRE_OPENSSL"),
                             "the openssl command is not installed (it makes the test certificates)"))
struct TLSTests {
    static func start(_ certificates: TestCertificates) async throws -> Harness {
        try await Harness.start { config in
            config.tlsCertificatePath = certificates.certificateFile
            config.tlsKeyPath = certificates.keyFile
        }
    }

    /// A logged-in client over `wss://` trusting `caFile` (nil: the system trust store).
    static func secureClient(_ user: String, port: Int, caFile: String?, host: String = "127.0.0.1",
                             login: Bool = true) async throws -> (RTMClient, AsyncRecorder<RTMEvent>) {
        try await Harness.client(user, port: port, configure: { config in
            config.endpoint = "wss://\(host):\(port)"
            config.caFile = caFile
            config.loginTimeout = 10   // a failure must come from the TLS problem, long before this
        }, login: login)
    }

    /// Logs in and returns the error (nil when it succeeded) and how long it took.
    static func loginError(_ client: RTMClient, _ user: String) async -> (RTMError?, Duration) {
        let start = ContinuousClock.now
        do {
            try await client.login(token: Harness.token(user))
            return (nil, ContinuousClock.now - start)
        } catch {
            return (error, ContinuousClock.now - start)
        }
    }

    @Test("TLS: wss:// clients trusting the CA (by IP and by host name) log in, subscribe, publish and receive; a stream channel joins over TLS")
    func endToEnd() async throws {
        let certificates = try await TestCertificates.make("a")
        defer { certificates.remove() }
        let harness = try await Self.start(certificates)
        let (alice, aliceEvents) = try await Self.secureClient("alice", port: harness.port, caFile: certificates.caFile)
        let (bob, _) = try await Self.secureClient("bob", port: harness.port, caFile: certificates.caFile, host: "localhost")
        try await alice.subscribe("room")
        _ = try await bob.publish(channel: "room", message: "over TLS")
        let received = await aliceEvents.first(within: soon) { $0.messageEvent?.text == "over TLS" }
        #expect(received?.messageEvent?.publisher == "bob")
        // A stream channel's own connection (K-3) goes over TLS too.
        let stream = try alice.createStreamChannel("cam")
        _ = try await stream.join()
        #expect(await stream.linkState == .connected)
        await stream.leave()
        await alice.logout()
        await bob.logout()
    }

    @Test("TLS: a plain ws:// client to the TLS port fails at once with tlsRequired (-10103), not a hang")
    func plainClientToTLSPort() async throws {
        let certificates = try await TestCertificates.make("b")
        defer { certificates.remove() }
        let harness = try await Self.start(certificates)
        let (client, events) = try await Harness.client("plain", port: harness.port, configure: { $0.loginTimeout = 10 }, login: false)
        let (error, elapsed) = await Self.loginError(client, "plain")
        #expect(error?.code == .tlsRequired, "\(String(describing: error))")
        #expect(error?.reason.contains("wss://") == true)
        #expect(elapsed < .seconds(3), "failed after \(elapsed), not at once")
        let failed = await events.first(within: soon) { $0.link?.currentState == .failed }
        #expect(failed?.link?.reasonCode == .loginRejected)
        #expect(harness.server.sessionCount == 0)
    }

    @Test("TLS: a client without the custom CA (system trust store) is refused with tlsHandshakeFailed (-10102); wss:// to a plain port too")
    func untrustedCertificate() async throws {
        let certificates = try await TestCertificates.make("c")
        defer { certificates.remove() }
        let harness = try await Self.start(certificates)
        let (client, _) = try await Self.secureClient("stranger", port: harness.port, caFile: nil, login: false)
        let (error, elapsed) = await Self.loginError(client, "stranger")
        #expect(error?.code == .tlsHandshakeFailed, "\(String(describing: error))")
        #expect(error?.reason.contains("not trusted") == true, "\(String(describing: error))")
        #expect(elapsed < .seconds(3))

        let plain = try await Harness.start()
        let (tlsToPlain, _) = try await Self.secureClient("tls-to-plain", port: plain.port, caFile: certificates.caFile, login: false)
        let (mismatch, _) = await Self.loginError(tlsToPlain, "tls-to-plain")
        #expect(mismatch?.code == .tlsHandshakeFailed, "\(String(describing: mismatch))")
    }

    @Test("TLS: a CA file that cannot be read is rejected at configuration time, naming caFile")
    func badCAFile() throws {
        var config = Harness.clientConfig("x", port: 1)
        config.endpoint = "wss://127.0.0.1:1"
        config.caFile = "/nonexistent/ca.pem"
        #expect { try RTMClient(config: config) } throws: { error in
            (error as? RTMError)?.code == .invalidParameter && (error as? RTMError)?.reason.contains("caFile") == true
        }
    }

    @Test("TLS: reloadTLSCertificate serves the new certificate to new connections, open ones keep theirs, a bad file keeps the old one")
    func reload() async throws {
        let first = try await TestCertificates.make("first")
        let second = try await TestCertificates.make("second")
        defer { first.remove(); second.remove() }
        let harness = try await Self.start(first)
        let (old, oldEvents) = try await Self.secureClient("old", port: harness.port, caFile: first.caFile)
        try await old.subscribe("room")
        // Before the reload a client trusting only the second CA is refused.
        let (early, _) = try await Self.secureClient("early", port: harness.port, caFile: second.caFile, login: false)
        #expect(await Self.loginError(early, "early").0?.code == .tlsHandshakeFailed)

        try second.install(over: first)
        try harness.server.reloadTLSCertificate()
        let (fresh, _) = try await Self.secureClient("fresh", port: harness.port, caFile: second.caFile)
        _ = try await fresh.publish(channel: "room", message: "after reload")
        // The connection opened before the reload is unaffected: it still receives.
        #expect(await oldEvents.first(within: soon) { $0.messageEvent?.text == "after reload" } != nil)
        #expect(await old.linkState == .connected)
        let (stale, _) = try await Self.secureClient("stale", port: harness.port, caFile: first.caFile, login: false)
        #expect(await Self.loginError(stale, "stale").0?.code == .tlsHandshakeFailed)

        // A broken certificate file: the reload throws, the current certificate stays.
        try "not a certificate".write(toFile: first.certificateFile, atomically: true, encoding: .utf8)
        #expect(throws: TLSFilesError.self) { try harness.server.reloadTLSCertificate() }
        let (after, _) = try await Self.secureClient("after", port: harness.port, caFile: second.caFile)
        #expect(await after.linkState == .connected)
        for client in [old, fresh, after] { await client.logout() }
    }

    @Test("TLS: rtm serve --tls-cert/--tls-key reloads on SIGHUP; rtm pub --url wss:// --ca-file publishes")
    func serveProcessReloadsOnHangup() async throws {
        let first = try await TestCertificates.make("proc1")
        let second = try await TestCertificates.make("proc2")
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-tls-\(UUID().uuidString)").path
        defer { first.remove(); second.remove(); try? FileManager.default.removeItem(atPath: data) }
        let port = try LoopbackPort.free()
        let server = try RTMProcess(arguments: [
            "serve", "--port", "\(port)", "--data-dir", data, "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
            "--tls-cert", first.certificateFile, "--tls-key", first.keyFile,
        ])
        try #require(await server.waitForLine(containing: "listening", within: processStart) != nil, "\(server.output)")
        let cli = ["--url", "wss://localhost:\(port)", "--app-id", Harness.appId, "--app-certificate", Harness.certificate]
        let before = try RTMProcess(arguments: ["pub", "room", "one", "--ca-file", first.caFile] + cli)
        await before.waitUntilExit()
        #expect(before.process.terminationStatus == 0, "\(before.output)")

        try second.install(over: first)
        server.signal(SIGHUP)
        #expect(await server.waitForLine(containing: "TLS certificate reloaded") != nil, "\(server.output)")
        let after = try RTMProcess(arguments: ["pub", "room", "two", "--ca-file", second.caFile] + cli)
        await after.waitUntilExit()
        #expect(after.process.terminationStatus == 0, "\(after.output)")
        #expect(server.process.isRunning)
    }
}
