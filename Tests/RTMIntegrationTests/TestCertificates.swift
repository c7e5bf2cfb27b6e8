import Foundation

/// A throwaway CA and a server certificate it signed (for `localhost` and 127.0.0.1), made at
/// test time with the `openssl` command (installed by `.ci/run`; the tests that need it skip
/// without it, unless `RTM_REQUIRE_OPENSSL=1`).
struct TestCertificates {
    let directory: URL
    /// The CA certificate (PEM), the file a client is given as `caFile`.
    let caFile: String
    /// The server's certificate chain and key (PEM).
    let certificateFile: String
    let keyFile: String

    /// Makes a CA named `name` and a server certificate in a new directory.
    static func make(_ name: String) async throws -> TestCertificates {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-tls-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = { (file: String) in dir.appendingPathComponent(file).path }
        let ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        try ext.write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try await openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=rtm test CA \(name)",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try await openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", path("server.key"), "-out", path("server.csr"), "-subj", "/CN=localhost"])
        try await openssl(["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                     "-CAcreateserial", "-out", path("server.pem"), "-days", "2", "-extfile", path("server.ext")])
        return TestCertificates(directory: dir, caFile: path("ca.pem"), certificateFile: path("server.pem"), keyFile: path("server.key"))
    }

    /// Copies this server certificate and key over `other`'s files (a certificate rotation).
    func install(over other: TestCertificates) throws {
        for (from, to) in [(certificateFile, other.certificateFile), (keyFile, other.keyFile)] {
            try FileManager.default.removeItem(atPath: to)
            try FileManager.default.copyItem(atPath: from, toPath: to)
        }
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    private static func openssl(_ arguments: [String]) async throws {
        let result = try await runProgram(program(named: "openssl") ?? "/usr/bin/openssl", arguments)
        guard result.status == 0 else {
            throw CertificateError(message: "openssl \(arguments.first ?? ""): \(result.output)")
        }
    }

    struct CertificateError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}
