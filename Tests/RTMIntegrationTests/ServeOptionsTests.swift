import Foundation
import RTMClient
import RTMTestSupport
import Testing

/// `rtm serve`'s durability and retention flags reach the server (a real process), and a bad
/// value is refused by name before anything listens.
@Suite(.realTime, .serialized)
struct ServeOptionsTests {
    @Test("M-1: `rtm serve --user-message-cap 2`: the third waiting message drops the oldest and the receiver is told; `--user-message-cap 0`, `--user-message-resend-window 0.5` and `--publish-resend-window 0` are refused by name")
    func storeFlags() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-flags-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        for (flag, value) in [("--user-message-cap", "0"), ("--user-message-resend-window", "0.5"), ("--publish-resend-window", "0")] {
            let refused = try RTMProcess(arguments: ["serve", "--port", "0", "--data-dir", dataDir, flag, value])
            await refused.waitUntilExit()
            #expect(refused.process.terminationStatus != 0)
            #expect(refused.output.contains { $0.contains(flag) }, "\(refused.output)")
        }
        let port = try LoopbackPort.free()
        let server = try RTMProcess(arguments: [
            "serve", "--port", "\(port)", "--data-dir", dataDir, "--app-id", Harness.appId, "--app-certificate", Harness.certificate,
            "--publish-rate", "0", "--user-message-cap", "2", "--store-full-sync", "--history-retention-hours", "0",
        ])
        try #require(await server.waitForLine(containing: "listening", within: processStart) != nil, "\(server.output)")
        let (alice, _) = try await Harness.client("alice", port: port)
        for i in 1...3 { try await alice.publish(toUser: "bob", message: "m\(i)") }
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        let dropped = await bobEvents.first(within: soon) { if case .userMessagesDropped = $0 { true } else { false } }
        if case .userMessagesDropped(let count)? = dropped { #expect(count == 1) } else { Issue.record("no dropped notice") }
        _ = await bobEvents.first(within: soon) { $0.messageEvent?.text == "m3" }
        #expect(await DeliveryTests.texts(bobEvents, user: true) == ["m2", "m3"])
        await bob.logout()
        await alice.logout()
    }

    @Test("`rtm serve --config FILE` and RTM_* variables: every option from a JSON file or the environment; the command line wins, then the environment; an unknown key or a bad value is refused by name")
    func configFileAndEnvironment() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-config-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        func write(_ json: String) throws -> String {
            let path = "\(dataDir)/config-\(UUID().uuidString).json"
            try json.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        for (json, words) in [(#"{"colour": "blue"}"#, "unknown setting colour"), (#"{"publish-rate": "fast"}"#, "json:publish-rate"),
                              (#"{"store-full-sync": "yes"}"#, "allowed true or false"), (#"["port"]"#, "not a JSON object")] {
            let refused = try RTMProcess(arguments: ["serve", "--port", "0", "--data-dir", dataDir, "--config", try write(json)])
            await refused.waitUntilExit()
            #expect(refused.process.terminationStatus != 0)
            #expect(refused.output.contains { $0.contains(words) }, "\(json): \(refused.output)")
        }
        let port = try LoopbackPort.free()
        let file = try write("""
            {"port": 1, "data-dir": "\(dataDir)", "app-id": "\(Harness.appId)", "app-certificate": "\(Harness.certificate)",
             "namespace": ["room.*:private"], "publish-rate": 0, "store-full-sync": true}
            """)
        // The file's port loses to the command line's; its namespaces to the environment's.
        let server = try RTMProcess(arguments: ["serve", "--port", "\(port)"],
                                    environment: ["RTM_CONFIG": file, "RTM_PORT": "99999", "RTM_NAMESPACE": "news.*:no-presence\nvip.*:private"])
        try #require(await server.waitForLine(containing: "listening", within: processStart) != nil, "\(server.output)")
        let (alice, _) = try await Harness.client("alice", port: port)
        _ = try await alice.subscribe("room.a")   // the file's private namespace is not in force
        #expect(await CapabilityTests.code { _ = try await alice.whoNow(channel: "news.a") } == .notPermitted)
        #expect(await CapabilityTests.code { _ = try await alice.subscribe("vip.a") } == .notPermitted)
        await alice.logout()
    }

    @Test("SIGHUP re-reads the configuration file's log level (a line at info is written, then not, then again) and namespaces")
    func sighupLogLevel() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-hup-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        let file = "\(dataDir)/rtm.json"
        func configure(_ level: String, namespaces: [String] = []) throws {
            let list = namespaces.map { "\"\($0)\"" }.joined(separator: ",")
            try #"{"log-level": "\#(level)", "login-deadline": 0.3, "app-id": "\#(Harness.appId)", "app-certificate": "\#(Harness.certificate)", "namespace": [\#(list)]}"#
                .write(toFile: file, atomically: true, encoding: .utf8)
        }
        try configure("info")
        let port = try LoopbackPort.free()
        let server = try RTMProcess(arguments: ["serve", "--port", "\(port)", "--data-dir", dataDir, "--config", file])
        try #require(await server.waitForLine(containing: "listening", within: processStart) != nil, "\(server.output)")
        /// A socket that never logs in, closed by the server at its login deadline ("deadline passed", at info).
        func silentSocket() async throws {
            let peer = try await RawPeer.connect(port: port)
            #expect(await peer.waitForClose(within: .seconds(5)))
        }
        func lines(_ text: String) -> Int { server.output.filter { $0.contains(text) }.count }
        try await silentSocket()
        #expect(await server.waitForLine(containing: "deadline passed") != nil)
        try configure("warning")
        kill(server.process.processIdentifier, SIGHUP)
        #expect(await server.waitForLine(containing: "log level warning") != nil, "\(server.output)")
        try await silentSocket()   // closed at its deadline, not logged
        try configure("info", namespaces: ["news.*:no-presence"])
        kill(server.process.processIdentifier, SIGHUP)
        #expect(await server.waitForLine(containing: "log level info") != nil, "\(server.output)")
        #expect(await server.waitForLine(containing: "SIGHUP: namespaces") != nil, "\(server.output)")
        let (alice, _) = try await Harness.client("alice", port: port)
        #expect(await CapabilityTests.code { _ = try await alice.whoNow(channel: "news.a") } == .notPermitted)
        await alice.logout()
        try await silentSocket()
        _ = await eventually(within: .seconds(5), every: .milliseconds(20)) { lines("deadline passed") >= 2 }
        #expect(lines("deadline passed") == 2, "\(server.output)")
    }

    @Test("`rtm serve --namespace PATTERN:private` with `rtm token --capability`: the CLI's capability token opens what it grants and nothing else; a bad pattern or operation is refused by name")
    func privateChannelsAndCapabilityTokens() async throws {
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-caps-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        let badPattern = try RTMProcess(arguments: ["serve", "--port", "0", "--data-dir", dataDir, "--namespace", "a*b:private"])
        await badPattern.waitUntilExit()
        #expect(badPattern.process.terminationStatus != 0)
        #expect(badPattern.output.contains { $0.contains("--namespace") }, "\(badPattern.output)")
        let credentials = ["--app-id", Harness.appId, "--app-certificate", Harness.certificate]
        let badOperation = try RTMProcess(arguments: ["token", "--user", "alice", "--capability", "room=fly"] + credentials)
        await badOperation.waitUntilExit()
        #expect(badOperation.process.terminationStatus != 0)
        #expect(badOperation.output.contains { $0.contains("unknown operation 'fly'") }, "\(badOperation.output)")
        let minted = try RTMProcess(arguments: ["token", "--user", "alice", "--capability", "private.ops=subscribe,publish",
                                                "--capability", "public.*=*", "--user-capability", "*=send"] + credentials)
        await minted.waitUntilExit()
        let capability = try #require(minted.output.first { $0.split(separator: ".").count == 3 }, "\(minted.output)")
        let port = try LoopbackPort.free()
        let server = try RTMProcess(arguments: ["serve", "--port", "\(port)", "--data-dir", dataDir, "--namespace", "private.*:private"] + credentials)
        try #require(await server.waitForLine(containing: "listening", within: processStart) != nil, "\(server.output)")
        let (alice, _) = try await Harness.client("alice", port: port, login: false)
        try await alice.login(token: Harness.token("alice"), capability: capability)
        _ = try await alice.subscribe("private.ops")
        _ = try await alice.subscribe("public.chat")
        #expect(await CapabilityTests.code { _ = try await alice.subscribe("private.hr") } == .notPermitted)
        #expect(await CapabilityTests.code { _ = try await alice.subscribe("other") } == .notPermitted)
        let (bob, _) = try await Harness.client("bob", port: port)
        #expect(await CapabilityTests.code { _ = try await bob.subscribe("private.ops") } == .notPermitted)
        _ = try await bob.subscribe("other")
        await alice.logout()
        await bob.logout()
    }

    @Test("`rtm serve --admin-tls-cert` without `--admin-tls-key` (and the reverse) is refused by name")
    func adminTLSFlagsGoTogether() async throws {
        for flag in ["--admin-tls-cert", "--admin-tls-key"] {
            let refused = try RTMProcess(arguments: ["serve", "--port", "0", "--admin-key", "k", flag, "/nonexistent.pem"])
            await refused.waitUntilExit()
            #expect(refused.process.terminationStatus != 0)
            #expect(refused.output.contains { $0.contains("--admin-tls-cert and --admin-tls-key go together") }, "\(refused.output)")
        }
    }

    /// Waits for `rtm serve` to exit and returns everything it printed.
    static func failure(of server: RTMProcess) async -> String {
        _ = await server.waitForLine(containing: "--data-dir")   // the output reader may lag the exit
        await server.waitUntilExit()
        #expect(server.process.terminationStatus != 0, "\(server.output)")
        return server.output.joined(separator: "\n")
    }

    static func expectOurWords(_ text: String) {
        for foreign in ["NSCocoaErrorDomain", "Code=", "couldn’t", "NSUnderlyingError", "NSFilePath"] {
            #expect(!text.contains(foreign), "\(text)")
        }
    }

    @Test("`rtm serve --data-dir <file>/sub`: exits naming the path that is a file and suggesting --data-dir, in our words (root included)")
    func dataDirectoryUnderAFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-datadir-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("a-file").path
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        // Without --app-id the development credentials are written first; with it, the store opens first.
        for credentials in [[], ["--app-id", Harness.appId, "--app-certificate", Harness.certificate]] {
            let server = try RTMProcess(arguments: ["serve", "--port", "0", "--data-dir", file + "/sub"] + credentials)
            let text = await Self.failure(of: server)
            #expect(text.contains("cannot use the data directory '\(file)/sub': \(file) is a file, not a directory"), "\(text)")
            #expect(text.contains("--data-dir <path>"), "\(text)")
            Self.expectOurWords(text)
        }
    }

    @Test("`rtm serve` run by an ordinary user in a directory it cannot write: exits with 'permission denied' naming the path and suggesting --data-dir")
    func dataDirectoryPermissionDenied() async throws {
        guard let ordinary = try OrdinaryUser.prepare() else { return }
        defer { ordinary.remove() }
        // Readable and searchable by everyone, writable by nobody but root (as an ordinary user, not even by us).
        let locked = ordinary.dir.appendingPathComponent("locked")
        try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: ordinary.user == nil ? 0o555 : 0o755], ofItemAtPath: locked.path)
        let server = try RTMProcess(arguments: ["serve", "--port", "0"], user: ordinary.user, binary: ordinary.binary, directory: locked)
        let text = await Self.failure(of: server)
        #expect(text.contains("cannot use the data directory 'rtm-data': permission denied creating \(locked.path)/rtm-data"), "\(text)")
        #expect(text.contains("--data-dir <path>"), "\(text)")
        Self.expectOurWords(text)
    }
}
