import Foundation
import RTMServer
import Testing

/// The admin listener over HTTPS (`adminTLSCertificatePath`), checked with curl, a client we
/// did not write; and the console's browser protections.
@Suite(.realTime, .serialized, .enabled(if: runsWhen(program(named: "openssl") != nil && program(named: "curl") != nil, orRequiredBy: "RTM_REQUIRE_OPENSSL"),
                             "the openssl and curl commands are needed (certificates; an outside HTTPS client)"))
struct AdminTLSTests {
    /// curl's status line and body for `url`, with the admin key; `options` before the URL.
    static func curl(_ url: String, _ options: [String] = []) async throws -> (status: Int32, output: String) {
        let curl = try #require(program(named: "curl"))
        return try await runProgram(curl, ["-sS", "--max-time", "10", "-H", "Authorization: Bearer \(AdminHarness.key)",
                                     "-w", "\nstatus=%{http_code}\n"] + options + [url])
    }

    @Test("admin over HTTPS: a client trusting the CA gets the API and the console; one that does not is refused; plain HTTP gets a 400 naming https://; a reload serves the new certificate")
    func adminOverHTTPS() async throws {
        let certificates = try await TestCertificates.make("admin")
        defer { certificates.remove() }
        let admin = try await AdminHarness.start {
            $0.adminTLSCertificatePath = certificates.certificateFile
            $0.adminTLSKeyPath = certificates.keyFile
        }
        let base = "https://127.0.0.1:\(admin.adminPort)"
        let info = try await Self.curl(base + "/v1/info", ["--cacert", certificates.caFile])
        #expect(info.status == 0 && info.output.contains("status=200") && info.output.contains("\"sessions\""), "\(info.output)")
        // The system trust store does not know the test CA.
        let untrusted = try await Self.curl(base + "/v1/info")
        #expect(untrusted.status != 0 && untrusted.output.contains("status=000"), "\(untrusted.output)")
        let plain = try await Self.curl("http://127.0.0.1:\(admin.adminPort)/v1/info")
        #expect(plain.output.contains("status=400") && plain.output.contains("this port requires TLS: connect with https://"), "\(plain.output)")
        // A rotated certificate (another CA) is served to new connections after a reload.
        let next = try await TestCertificates.make("admin-next")
        defer { next.remove() }
        try next.install(over: certificates)
        try admin.harness.server.reloadTLSCertificate()
        #expect(try await Self.curl(base + "/v1/info", ["--cacert", next.caFile]).output.contains("status=200"))
        #expect(try await Self.curl(base + "/v1/info", ["--cacert", certificates.caFile]).status != 0)
    }

    @Test("`rtm admin --ca-file` (and SSL_CERT_FILE) reaches an HTTPS admin listener whose certificate a private CA signed; without it the error names the untrusted certificate in our words; a CA file that cannot be used is named")
    func adminCommandTrustsPrivateCA() async throws {
        let certificates = try await TestCertificates.make("admin-cli")
        let other = try await TestCertificates.make("admin-cli-other")
        defer { certificates.remove(); other.remove() }
        let admin = try await AdminHarness.start {
            $0.adminTLSCertificatePath = certificates.certificateFile
            $0.adminTLSKeyPath = certificates.keyFile
        }
        let url = "https://127.0.0.1:\(admin.adminPort)"
        func rtmAdmin(_ options: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
            let process = try RTMProcess(arguments: ["admin", "info", "--admin-url", url, "--admin-key", AdminHarness.key] + options,
                                         environment: environment)
            await process.waitUntilExit()
            return (process.process.terminationStatus, process.output.joined(separator: "\n"))
        }
        let trusted = try await rtmAdmin(["--ca-file", certificates.caFile])
        #expect(trusted.status == 0 && trusted.output.contains("\"sessions\""), "\(trusted.output)")
        let fromEnvironment = try await rtmAdmin([], environment: ["SSL_CERT_FILE": certificates.caFile])
        #expect(fromEnvironment.status == 0 && fromEnvironment.output.contains("\"sessions\""), "\(fromEnvironment.output)")
        for (options, environment) in [([String](), [String: String]()), (["--ca-file", other.caFile], [:])] {
            let untrusted = try await rtmAdmin(options, environment: environment)
            #expect(untrusted.status != 0, "\(untrusted.output)")
            #expect(untrusted.output.contains("the admin API's certificate at 127.0.0.1:\(admin.adminPort) is not trusted"), "\(untrusted.output)")
            #expect(untrusted.output.contains("--ca-file"), "\(untrusted.output)")
            for foreign in ["NSURLErrorDomain", "Code=", "(null)"] { #expect(!untrusted.output.contains(foreign), "\(untrusted.output)") }
        }
        let missing = try await rtmAdmin(["--ca-file", "/nonexistent/ca.pem"])
        #expect(missing.status != 0 && missing.output.contains("--ca-file /nonexistent/ca.pem is not a readable PEM file of CA certificates"),
                "\(missing.output)")
    }

    @Test("a reload rotates each listener on its own: a broken client certificate does not keep the admin listener's new one from being served")
    func reloadEachListener() async throws {
        let client = try await TestCertificates.make("client-side")
        let adminFirst = try await TestCertificates.make("admin-first")
        let adminNext = try await TestCertificates.make("admin-second")
        defer { client.remove(); adminFirst.remove(); adminNext.remove() }
        let admin = try await AdminHarness.start {
            $0.tlsCertificatePath = client.certificateFile
            $0.tlsKeyPath = client.keyFile
            $0.adminTLSCertificatePath = adminFirst.certificateFile
            $0.adminTLSKeyPath = adminFirst.keyFile
        }
        try "not a certificate".write(toFile: client.certificateFile, atomically: true, encoding: .utf8)
        try adminNext.install(over: adminFirst)
        #expect(throws: (any Error).self) { try admin.harness.server.reloadTLSCertificate() }
        let base = "https://127.0.0.1:\(admin.adminPort)"
        let rotated = try await Self.curl(base + "/v1/info", ["--cacert", adminNext.caFile])
        #expect(rotated.output.contains("status=200"), "\(rotated.output)")
    }

    @Test("admin: listening off loopback over plain HTTP logs a warning that the key crosses the network in clear; with a certificate it does not")
    func plainOffLoopbackWarns() async throws {
        let plain = try await AdminHarness.start { $0.adminHost = "0.0.0.0" }
        #expect(plain.logs.contains(.warning, "admin key crosses it in clear"))
        await plain.stop()
        let loopback = try await AdminHarness.start()
        #expect(!loopback.logs.contains(.warning, "admin key crosses it in clear"))
        await loopback.stop()
        let certificates = try await TestCertificates.make("admin-open")
        defer { certificates.remove() }
        let secure = try await AdminHarness.start {
            $0.adminHost = "0.0.0.0"
            $0.adminTLSCertificatePath = certificates.certificateFile
            $0.adminTLSKeyPath = certificates.keyFile
        }
        #expect(!secure.logs.contains(.warning, "admin key crosses it in clear"))
        await secure.stop()
    }

    @Test("admin: a certificate without its key is refused at start, naming the setting")
    func certificateWithoutKey() async throws {
        var config = Harness.serverConfig()
        config.adminKey = AdminHarness.key
        config.adminTLSCertificatePath = "/nonexistent/cert.pem"
        #expect { try RTMServer(configuration: config) } throws: { "\($0)".contains("adminTLSKeyPath") }
    }

    @Test("admin console: served with a Content-Security-Policy that lets only its own script run (its SHA-256, computed here by openssl), and no framing")
    func consoleHeaders() async throws {
        let admin = try await AdminHarness.start()
        let page = try await Self.curl("http://127.0.0.1:\(admin.adminPort)/console", ["-D", "-"])
        let lines = page.output.split(separator: "\r\n").map(String.init)
        func header(_ name: String) -> String? {
            lines.first { $0.lowercased().hasPrefix(name.lowercased() + ":") }.map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
        }
        let policy = try #require(header("Content-Security-Policy"), "\(page.output.prefix(800))")
        #expect(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'") && policy.contains("connect-src 'self'"))
        #expect(header("X-Frame-Options") == "DENY")
        #expect(header("X-Content-Type-Options") == "nosniff")
        // The hash in the policy is the served script's: computed by openssl from the body.
        let body = page.output
        let start = try #require(body.range(of: "<script>")).upperBound
        let end = try #require(body.range(of: "</script>", range: start..<body.endIndex)).lowerBound
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-console-\(UUID()).js")
        try Data(body[start..<end].utf8).write(to: script)
        defer { try? FileManager.default.removeItem(at: script) }
        let openssl = try #require(program(named: "openssl"))
        let digest = try await runProgram("/bin/sh", ["-c", "\(openssl) dgst -sha256 -binary '\(script.path)' | \(openssl) base64 -A"])
        #expect(digest.status == 0 && policy.contains("script-src 'sha256-\(digest.output.trimmingCharacters(in: .whitespacesAndNewlines))'"),
                "\(policy) vs \(digest.output)")
    }
}
