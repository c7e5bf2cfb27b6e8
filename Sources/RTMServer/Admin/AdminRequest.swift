import Foundation
import NIOCore
import NIOHTTP1
import RTMAdminAPI

/// One admin HTTP request, read whole.
struct AdminRequest: Sendable {
    let method: HTTPMethod
    /// The path without the query, percent-decoded per segment.
    let segments: [String]
    let query: [String: String]
    let authorization: String?
    /// Every header, as sent (the generated routes read Content-Type and Accept).
    let headers: [(String, String)]
    let body: ByteBuffer?
    /// The peer's address, for the log.
    let remote: String

    init(head: HTTPRequestHead, body: ByteBuffer?, remote: String) {
        self.method = head.method
        let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts.first.map(String.init) ?? "/"
        self.segments = path.split(separator: "/").map { String($0).removingPercentEncoding ?? String($0) }
        var query: [String: String] = [:]
        if parts.count > 1 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let decode = { (s: Substring) in s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s) }
                query[decode(kv[0])] = kv.count > 1 ? decode(kv[1]) : ""
            }
        }
        self.query = query
        self.authorization = head.headers.first(name: "Authorization")
        self.headers = head.headers.map { ($0.name, $0.value) }
        self.body = body
        self.remote = remote
    }

    /// The path as written in the log.
    var path: String { "/" + segments.joined(separator: "/") }

    /// The path `segments` and the query, percent-encoded again one way (every byte but
    /// `A-Z a-z 0-9 - . _ ~`), as the generated routes read them: a `+` or a `,` in a value
    /// stays that character.
    func encodedPath(_ segments: [String]) -> String {
        let path = "/" + segments.map(Self.encoded).joined(separator: "/")
        guard !query.isEmpty else { return path }
        return path + "?" + query.sorted { $0.key < $1.key }.map { "\(Self.encoded($0.key))=\(Self.encoded($0.value))" }.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `text` percent-encoded, every byte but the unreserved ones (RFC 3986 §2.3).
    static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}

/// One admin HTTP response.
struct AdminResponse: Sendable {
    var status: HTTPResponseStatus
    var contentType: String
    var body: ByteBuffer
    var extraHeaders: [(String, String)] = []

    /// A JSON response (sorted keys, for stable output).
    static func json<T: Encodable>(_ value: T, status: HTTPResponseStatus = .ok) -> AdminResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return AdminResponse(status: status, contentType: "application/json", body: ByteBuffer(bytes: data))
    }

    /// An error in the admin API's error shape.
    static func error(_ status: HTTPResponseStatus, _ name: String, _ message: String, code: Int? = nil) -> AdminResponse {
        json(Components.Schemas._Error(error: name, message: message, code: code), status: status)
    }
}

/// A request the admin API refuses, with the status and message it answers.
struct AdminFailure: Error {
    let response: AdminResponse

    static func badRequest(_ message: String, code: Int? = nil) -> AdminFailure {
        AdminFailure(response: .error(.badRequest, "badRequest", message, code: code))
    }

    static func notFound(_ message: String, code: Int? = nil) -> AdminFailure {
        AdminFailure(response: .error(.notFound, "notFound", message, code: code))
    }
}
