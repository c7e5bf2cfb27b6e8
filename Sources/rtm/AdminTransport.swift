import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import OpenAPIRuntime
import RTMServer

/// The generated admin API client's transport (`RTMAdminAPI.Client`): each call is one request on
/// its own connection through the server's HTTP client (`WebhookHTTPClient`), with
/// `rtm admin`'s trust roots for https and its key. A failure to get an answer is an
/// `AdminConnectionError` in our words (an untrusted certificate named as such); a refusal
/// (any status but 2xx) an `AdminCallError` with the server's message.
struct AdminTransport: ClientTransport {
    let trust: AdminTrust
    /// How long a call may take, connecting included.
    let timeout: TimeAmount
    /// The admin key, sent as a bearer token.
    let key: String
    /// The most of an answer kept.
    static let maxResponseBytes = 64 << 20

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        let base = baseURL.absoluteString.hasSuffix("/") ? String(baseURL.absoluteString.dropLast()) : baseURL.absoluteString
        guard let target = WebhookHTTPClient.Target(base + (request.path ?? "/")) else {
            throw AdminURLError(url: base)
        }
        let client = try WebhookHTTPClient(target: target, timeout: timeout, group: MultiThreadedEventLoopGroup.singleton,
                                           trustRoots: trust.roots, maxResponseBytes: Self.maxResponseBytes)
        var data: Data?
        if let body { data = try await Data(collecting: body, upTo: 1 << 20) }
        // The client sets Host, Connection, User-Agent and, with a body, its type and length.
        let skipped: Set<HTTPField.Name> = [.contentType, .contentLength, .userAgent, .connection]
        let headers = request.headerFields.filter { !skipped.contains($0.name) }.map { ($0.name.rawName, $0.value) }
            + [("Authorization", "Bearer \(key)")]
        let reply: WebhookHTTPClient.Reply
        do {
            reply = try await client.send(HTTPMethod(rawValue: request.method.rawValue), body: data, headers: headers, userAgent: "rtm-admin").get()
        } catch let error as WebhookDeliveryError {
            throw AdminConnectionError(target: target, error: error, trust: trust)
        }
        guard (200..<300).contains(reply.status.code) else {
            let data = Data(reply.body.readableBytesView)
            let answer = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            throw AdminCallError(status: Int(reply.status.code), message: answer?["message"] as? String ?? String(decoding: data, as: UTF8.self))
        }
        var fields = HTTPFields()
        for header in reply.headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        let response = HTTPResponse(status: .init(code: Int(reply.status.code), reasonPhrase: reply.status.reasonPhrase), headerFields: fields)
        return (response, HTTPBody(Array(reply.body.readableBytesView)))
    }
}

/// An admin URL that is not an http:// or https:// URL with a host.
struct AdminURLError: Error, CustomStringConvertible {
    let url: String
    var description: String { "bad --admin-url '\(url)': an http:// or https:// URL with a host" }
}
