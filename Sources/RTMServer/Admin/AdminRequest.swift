import Foundation
import NIOCore
import NIOHTTP1

/// One admin HTTP request, read whole.
struct AdminRequest: Sendable {
    let method: HTTPMethod
    /// The path without the query, percent-decoded per segment.
    let segments: [String]
    let query: [String: String]
    let authorization: String?
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
        self.body = body
        self.remote = remote
    }

    /// The path as written in the log.
    var path: String { "/" + segments.joined(separator: "/") }
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
        json(AdminModels.ErrorBody(error: name, message: message, code: code), status: status)
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
