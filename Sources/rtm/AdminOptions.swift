import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RTMServer

/// Options shared by the `rtm admin` verbs, and the one HTTP call they make.
struct AdminOptions: ParsableArguments {
    @Option(help: "Admin API URL (default: $RTM_ADMIN_URL, else http://127.0.0.1:9601).") var adminURL: String?
    @Option(help: "Admin key (default: $RTM_ADMIN_KEY).") var adminKey: String?
    @Option(help: "App id (may be left out when the server serves one app).") var appId: String?
    @Option(help: "For an https:// admin URL: a PEM file of the CA certificates to trust instead of the system trust store (default: $SSL_CERT_FILE, else the system's).")
    var caFile: String?

    /// How long a call may take, connecting included.
    static let timeout = TimeAmount.seconds(30)

    /// Calls the admin API and prints the JSON answer (pretty); a refusal is an error naming
    /// the server's message (exit 1).
    func call(_ method: HTTPMethod, _ path: String, query: [String: String?] = [:], body: [String: Any?]? = nil) async throws {
        let environment = ProcessInfo.processInfo.environment
        let base = adminURL ?? environment["RTM_ADMIN_URL"] ?? "http://127.0.0.1:9601"
        guard let key = adminKey ?? environment["RTM_ADMIN_KEY"], !key.isEmpty else {
            throw ValidationError("no admin key: pass --admin-key or set RTM_ADMIN_KEY")
        }
        var items = query.compactMap { name, value in value.map { URLQueryItem(name: name, value: $0) } }
        if method == .GET, let appId { items.append(URLQueryItem(name: "appId", value: appId)) }
        guard var components = URLComponents(string: base + path) else { throw ValidationError("bad --admin-url '\(base)'") }
        if !items.isEmpty { components.queryItems = items.sorted { $0.name < $1.name } }
        guard let url = components.url?.absoluteString, let target = WebhookHTTPClient.Target(url) else {
            throw ValidationError("bad --admin-url '\(base)': an http:// or https:// URL with a host")
        }
        var json: Data?
        if var body {
            if let appId { body["appId"] = appId }
            json = try JSONSerialization.data(withJSONObject: body.compactMapValues { $0 })
        }
        let trust = try AdminTrust(caFile: caFile, environment: environment)
        let client = try WebhookHTTPClient(target: target, timeout: Self.timeout, group: MultiThreadedEventLoopGroup.singleton,
                                           trustRoots: trust.roots, maxResponseBytes: 64 << 20)
        let reply: WebhookHTTPClient.Reply
        do {
            reply = try await client.send(method, body: json, headers: [("Authorization", "Bearer \(key)")], userAgent: "rtm-admin").get()
        } catch let error as WebhookDeliveryError {
            throw AdminConnectionError(target: target, error: error, trust: trust)
        }
        let data = Data(reply.body.readableBytesView)
        let answer = try? JSONSerialization.jsonObject(with: data)
        guard (200..<300).contains(reply.status.code) else {
            let message = (answer as? [String: Any])?["message"] as? String ?? String(decoding: data, as: UTF8.self)
            throw AdminCallError(status: Int(reply.status.code), message: message)
        }
        let pretty = answer.flatMap { try? JSONSerialization.data(withJSONObject: $0, options: [.prettyPrinted, .sortedKeys]) } ?? data
        FileHandle.standardOutput.write(pretty + Data("\n".utf8))
    }
}

/// The admin API refused a call.
struct AdminCallError: Error, CustomStringConvertible {
    let status: Int
    let message: String
    var description: String { "admin API answered \(status): \(message)" }
}
