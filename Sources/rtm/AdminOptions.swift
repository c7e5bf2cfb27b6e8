import ArgumentParser
import Foundation
import NIOCore
import OpenAPIRuntime
import RTMAdminAPI

/// Options shared by the `rtm admin` verbs, and the client they call the API with (generated
/// from openapi/admin.yaml; `AdminTransport` carries it).
struct AdminOptions: ParsableArguments {
    @Option(help: "Admin API URL (default: $RTM_ADMIN_URL, else http://127.0.0.1:9601).") var adminURL: String?
    @Option(help: "Admin key (default: $RTM_ADMIN_KEY).") var adminKey: String?
    @Option(help: "App id (may be left out when the server serves one app).") var appId: String?
    @Option(help: "For an https:// admin URL: a PEM file of the CA certificates to trust instead of the system trust store (default: $SSL_CERT_FILE, else the system's).")
    var caFile: String?

    /// How long a call may take, connecting included.
    static let timeout = TimeAmount.seconds(30)

    /// Calls the API with the generated client and prints the JSON answer (pretty, keys
    /// sorted). A refusal is an `AdminCallError` naming the server's message; an answer the
    /// document does not describe is named as such.
    func call<Answer: Encodable>(_ operation: (Client) async throws -> Answer) async throws {
        let environment = ProcessInfo.processInfo.environment
        let base = adminURL ?? environment["RTM_ADMIN_URL"] ?? "http://127.0.0.1:9601"
        guard let key = adminKey ?? environment["RTM_ADMIN_KEY"], !key.isEmpty else {
            throw ValidationError("no admin key: pass --admin-key or set RTM_ADMIN_KEY")
        }
        guard let url = URL(string: base), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
            throw AdminURLError(url: base)
        }
        let transport = AdminTransport(trust: try AdminTrust(caFile: caFile, environment: environment), timeout: Self.timeout, key: key)
        let answer: Answer
        do {
            answer = try await operation(Client(serverURL: url, transport: transport))
        } catch let error as ClientError {
            switch error.underlyingError {
            case let ours as AdminCallError: throw ours
            case let ours as AdminConnectionError: throw ours
            case let ours as AdminURLError: throw ours
            default: throw AdminAnswerError(operation: error.operationID, reason: "\(error.underlyingError)")
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        FileHandle.standardOutput.write(try encoder.encode(answer) + Data("\n".utf8))
    }
}

/// The admin API refused a call.
struct AdminCallError: Error, CustomStringConvertible {
    let status: Int
    let message: String
    var description: String { "admin API answered \(status): \(message)" }
}

/// An answer the admin API's document (openapi/admin.yaml) does not describe.
struct AdminAnswerError: Error, CustomStringConvertible {
    let operation: String
    let reason: String
    var description: String { "the admin API's answer to \(operation) does not match openapi/admin.yaml: \(reason)" }
}
