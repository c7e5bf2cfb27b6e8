import Foundation
import RTMTestSupport
import Testing

/// `rtm serve`'s settings from the command line, the environment and a JSON or YAML file: every
/// value is checked against its range wherever it comes from, and refused before anything
/// listens with one message form naming the setting, where the value came from and the range.
@Suite(.realTime, .serialized)
struct ServeSettingsTests {
    /// A scratch directory for one test's data directory and configuration files.
    struct Scratch {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-settings-\(UUID().uuidString)").path

        init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }

        func write(_ text: String, as name: String = "rtm-\(UUID().uuidString).json") throws -> String {
            let file = "\(path)/\(name)"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }

        func remove() { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Runs `rtm serve` with settings that must be refused: it has to exit (not listen) with a
    /// failure; returns everything it printed.
    static func refusal(_ arguments: [String], environment: [String: String] = [:], dataDir: String) async throws -> String {
        let server = try RTMProcess(arguments: ["serve", "--data-dir", dataDir] + arguments, environment: environment)
        let ended = await eventually(within: .seconds(10), every: .milliseconds(20)) {
            !server.process.isRunning || server.output.contains { $0.contains("listening") }
        }
        let text = server.output.joined(separator: "\n")
        #expect(ended && !server.process.isRunning, "\(arguments) \(environment): still running\n\(text)")
        guard !server.process.isRunning else {
            await server.stopped()
            return text
        }
        await server.waitUntilExit()
        #expect(server.process.terminationStatus != 0, "\(text)")
        return server.output.joined(separator: "\n")
    }

    /// Each case's settings refused with its words in the output, and none of `never`.
    static func expectRefused(_ cases: [(arguments: [String], environment: [String: String], words: String)], dataDir: String,
                              never: [String]) async throws {
        for (arguments, environment, words) in cases {
            let text = try await refusal(arguments, environment: environment, dataDir: dataDir)
            #expect(text.contains(words), "\(arguments) \(environment): \(text)")
            for forbidden in never { #expect(!text.contains(forbidden), "\(text)") }
        }
    }

    @Test("Out-of-range flags are refused naming the setting, the flag and the range: --heartbeat-slack=-1, --publish-rate=-5, --login-rate=-1, --login-deadline=-1, --port 70001")
    func flagsOutOfRange() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let cases: [(arguments: [String], environment: [String: String], words: String)] = [
            (["--heartbeat-slack=-1"], [:], "invalid setting heartbeat-slack from flag --heartbeat-slack: got -1, allowed 0.1…3600"),
            (["--publish-rate=-5"], [:], "invalid setting publish-rate from flag --publish-rate: got -5, allowed 0…1000000"),
            (["--login-rate=-1"], [:], "invalid setting login-rate from flag --login-rate: got -1, allowed 0…1000000"),
            (["--login-deadline=-1"], [:], "invalid setting login-deadline from flag --login-deadline: got -1, allowed 0.1…3600"),
            (["--port", "70001"], [:], "invalid setting port from flag --port: got 70001, allowed 0…65535"),
            (["--heartbeat-slack", "-1", "--port", "0"], [:], "invalid setting heartbeat-slack from flag --heartbeat-slack: got -1"),
        ]
        try await Self.expectRefused(cases, dataDir: scratch.path, never: ["Missing value"])
    }

    @Test("A file's or a variable's value out of range (or negative) is refused naming file:key or the variable, never 'Missing value'")
    func fileAndEnvironmentOutOfRange() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let portFile = try scratch.write(#"{"port": 70000}"#)
        let rateFile = try scratch.write(#"{"publish-rate": -5, "port": 0}"#)
        let yamlFile = try scratch.write("port: 0\nlogin-deadline: -1\n", as: "rtm.yaml")
        let cases: [(arguments: [String], environment: [String: String], words: String)] = [
            (["--config", portFile], [:], "invalid setting port from file \(portFile):port: got 70000, allowed 0…65535"),
            (["--config", rateFile], [:], "invalid setting publish-rate from file \(rateFile):publish-rate: got -5, allowed 0…1000000"),
            (["--config", yamlFile], [:], "invalid setting login-deadline from file \(yamlFile):login-deadline: got -1, allowed 0.1…3600"),
            (["--port", "0"], ["RTM_PUBLISH_RATE": "-5"], "invalid setting publish-rate from variable RTM_PUBLISH_RATE: got -5, allowed 0…1000000"),
            (["--port", "0"], ["RTM_LOGIN_RATE": "-1"], "invalid setting login-rate from variable RTM_LOGIN_RATE: got -1, allowed 0…1000000"),
            (["--port", "0"], ["RTM_CONFIG": rateFile], "invalid setting publish-rate from file \(rateFile):publish-rate: got -5"),
        ]
        try await Self.expectRefused(cases, dataDir: scratch.path, never: ["Missing value"])
    }

    @Test("A value of the wrong kind, an unknown key or flag, and a bad choice are refused in the same form; a secret's value is never printed")
    func wrongKindsAndSecrets() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let fastFile = try scratch.write(#"{"publish-rate": "fast"}"#)
        let flagFile = try scratch.write(#"{"store-full-sync": "yes"}"#)
        let colourFile = try scratch.write(#"{"colour": "blue"}"#)
        let listFile = try scratch.write(#"["port"]"#)
        let secretFile = try scratch.write(#"{"admin-key": 987654321}"#)
        let cases: [(arguments: [String], environment: [String: String], words: String)] = [
            (["--config", fastFile], [:], "invalid setting publish-rate from file \(fastFile):publish-rate: got \"fast\", allowed a number in 0…1000000"),
            (["--config", flagFile], [:], "invalid setting store-full-sync from file \(flagFile):store-full-sync: got \"yes\", allowed true or false"),
            (["--config", colourFile], [:], "unknown setting colour in file \(colourFile)"),
            (["--config", listFile], [:], "\(listFile) is not a JSON object"),
            (["--colour", "blue"], [:], "unknown setting --colour"),
            (["--publish-rate", "fast"], [:], "invalid setting publish-rate from flag --publish-rate: got \"fast\", allowed a number in 0…1000000"),
            (["--port", "0"], ["RTM_LOG_LEVEL": "loud"], "invalid setting log-level from variable RTM_LOG_LEVEL: got \"loud\", allowed one of trace, debug, info, notice, warning, error"),
            (["--port", "0", "--admin-key", "k", "--admin-listen", "nowhere"], [:], "invalid setting admin-listen from flag --admin-listen: got \"nowhere\", allowed host:port"),
            (["--port", "0"], ["RTM_DEFAULT_CAPABILITY": "{"], "invalid setting default-capability from variable RTM_DEFAULT_CAPABILITY: got \"{\", allowed a capability token's rtm claim as JSON (this is not JSON)"),
            (["--port", "0", "--default-capability", #"{"channels":{"lobby":["fly"]}}"#], [:], "invalid setting default-capability from flag --default-capability: got"),
            (["--config", secretFile], [:], "invalid setting admin-key from file \(secretFile):admin-key: got a secret value, allowed a string"),
        ]
        try await Self.expectRefused(cases, dataDir: scratch.path, never: ["987654321"])
    }

    @Test("Settings from a YAML file; the command line wins over the environment, which wins over the file; secrets appear in no log line, even at trace")
    func yamlLayersAndSecretsNeverLogged() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let port = try LoopbackPort.free()
        let file = try scratch.write("""
            port: 1
            data-dir: \(scratch.path)
            app-id: \(Harness.appId)
            app-certificate: \(Harness.certificate)
            namespace:
              - room.*:private
            publish-rate: 0
            log-level: trace
            webhook-url: http://127.0.0.1:9/hook
            webhook-secret: hook-secret-4711
            """, as: "rtm.yaml")
        let server = try RTMProcess(arguments: ["serve", "--port", "\(port)", "--config", file, "--admin-key", "admin-secret-4711", "--admin-listen", "127.0.0.1:0"],
                                    environment: ["RTM_PORT": "99999", "RTM_NAMESPACE": "news.*:no-presence\nvip.*:private"])
        try #require(await server.waitForLine(containing: "listening", within: processStart) != nil, "\(server.output)")
        let (alice, _) = try await Harness.client("alice", port: port)
        _ = try await alice.subscribe("room.a")   // the file's private namespace lost to the environment's
        #expect(await CapabilityTests.code { _ = try await alice.whoNow(channel: "news.a") } == .notPermitted)
        #expect(await CapabilityTests.code { _ = try await alice.subscribe("vip.a") } == .notPermitted)
        await alice.logout()
        try "publish-rate: -1\nwebhook-secret: 12".write(toFile: file, atomically: true, encoding: .utf8)
        server.signal(SIGHUP)
        #expect(await server.waitForLine(containing: "SIGHUP: the settings could not be read again") != nil, "\(server.output)")
        let text = server.output.joined(separator: "\n")
        for secret in ["hook-secret-4711", "admin-secret-4711", Harness.certificate] {
            #expect(!text.contains(secret), "\(secret) in \(text)")
        }
    }
}
