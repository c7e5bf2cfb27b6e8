import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Options shared by the `rtm admin` verbs, and the one HTTP call they make.
struct AdminOptions: ParsableArguments {
    @Option(help: "Admin API URL (default: $RTM_ADMIN_URL, else http://127.0.0.1:9601).") var adminURL: String?
    @Option(help: "Admin key (default: $RTM_ADMIN_KEY).") var adminKey: String?
    @Option(help: "App id (may be left out when the server serves one app).") var appId: String?

    /// Calls the admin API and prints the JSON answer (pretty); a refusal is an error naming
    /// the server's message (exit 1).
    func call(_ method: String, _ path: String, query: [String: String?] = [:], body: [String: Any?]? = nil) async throws {
        let environment = ProcessInfo.processInfo.environment
        let base = adminURL ?? environment["RTM_ADMIN_URL"] ?? "http://127.0.0.1:9601"
        guard let key = adminKey ?? environment["RTM_ADMIN_KEY"], !key.isEmpty else {
            throw ValidationError("no admin key: pass --admin-key or set RTM_ADMIN_KEY")
        }
        var items = query.compactMap { name, value in value.map { URLQueryItem(name: name, value: $0) } }
        if method == "GET", let appId { items.append(URLQueryItem(name: "appId", value: appId)) }
        guard var components = URLComponents(string: base + path) else { throw ValidationError("bad --admin-url '\(base)'") }
        if !items.isEmpty { components.queryItems = items.sorted { $0.name < $1.name } }
        guard let url = components.url else { throw ValidationError("bad --admin-url '\(base)'") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        if var body {
            if let appId { body["appId"] = appId }
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONSerialization.data(withJSONObject: body.compactMapValues { $0 })
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let json = try? JSONSerialization.jsonObject(with: data)
        guard (200..<300).contains(status) else {
            let message = (json as? [String: Any])?["message"] as? String ?? String(decoding: data, as: UTF8.self)
            throw AdminCallError(status: status, message: message)
        }
        let pretty = json.flatMap { try? JSONSerialization.data(withJSONObject: $0, options: [.prettyPrinted, .sortedKeys]) } ?? data
        FileHandle.standardOutput.write(pretty + Data("\n".utf8))
    }
}

/// The admin API refused a call.
struct AdminCallError: Error, CustomStringConvertible {
    let status: Int
    let message: String
    var description: String { "admin API answered \(status): \(message)" }
}
