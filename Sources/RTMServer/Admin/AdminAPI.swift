import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RTMProtocol

/// The admin HTTP API (`openapi/admin.yaml`): routes a request, checks the admin key
/// (`Authorization: Bearer <key>`, compared in constant time) and runs the endpoint against the
/// hub. Every `/v1/…` endpoint needs the key; `GET /console` (the web console, which asks for
/// the key in the page) does not.
struct AdminAPI: Sendable {
    let hub: Hub
    let key: String
    let startedAt: Int64
    let node: String

    typealias Respond = @Sendable (AdminResponse) -> Void

    /// Answers `request` (at once, or later for the store-backed endpoints).
    func handle(_ request: AdminRequest, respond: @escaping Respond) {
        let segments = request.segments
        if segments.isEmpty || segments == ["console"] {
            guard request.method == .GET else { return respond(Self.notAllowed(request, allowed: .GET)) }
            var page = AdminResponse(status: .ok, contentType: "text/html; charset=utf-8", body: ByteBuffer(string: AdminConsolePage.html))
            page.extraHeaders = AdminConsolePage.headers
            respond(page)
            return
        }
        guard segments.first == "v1" else {
            respond(.error(.notFound, "notFound", "no such endpoint: \(request.method) \(request.path) (the API is under /v1, the console at /console)"))
            return
        }
        guard authorized(request) else {
            hub.logger.warning("admin: request refused (\(request.authorization == nil ? "no" : "wrong") admin key)",
                               metadata: ["method": "\(request.method)", "path": "\(request.path)", "remote": "\(request.remote)"])
            var response = AdminResponse.error(.unauthorized, "unauthorized",
                                               request.authorization == nil ? "missing admin key (Authorization: Bearer <key>)" : "wrong admin key")
            response.extraHeaders = [("WWW-Authenticate", "Bearer realm=\"rtm-admin\"")]
            respond(response)
            return
        }
        do {
            try route(request, Array(segments.dropFirst()), respond: respond)
        } catch let failure as AdminFailure {
            respond(failure.response)
        } catch {
            respond(.error(.internalServerError, "internal", "\(error)"))
        }
    }

    /// The collection endpoints, by path under `/v1`, and the methods they take.
    static let endpoints: [String: HTTPMethod] = [
        "info": .GET, "channels": .GET, "sessions": .GET, "presence/whonow": .GET, "presence/wherenow": .GET,
        "history": .GET, "bans": .GET, "publish": .POST, "send": .POST, "disconnect": .POST, "kick": .POST,
        "ban": .POST, "unban": .POST, "revoke": .POST,
    ]

    private func route(_ request: AdminRequest, _ path: [String], respond: @escaping Respond) throws {
        // `channels/{channel}`: one channel, inspected.
        if path.count == 2, path[0] == "channels" {
            guard request.method == .GET else { return respond(Self.notAllowed(request, allowed: .GET)) }
            return respond(.json(try channel(path[1], request)))
        }
        let joined = path.joined(separator: "/")
        guard let method = Self.endpoints[joined] else {
            return respond(.error(.notFound, "notFound", "no such endpoint: \(request.method) \(request.path)"))
        }
        guard method == request.method else { return respond(Self.notAllowed(request, allowed: method)) }
        switch joined {
        case "info": info(respond: respond)
        case "channels": respond(.json(try channels(request)))
        case "sessions": try sessions(request, respond: respond)
        case "presence/whonow": respond(.json(try whoNow(request)))
        case "presence/wherenow": respond(.json(try whereNow(request)))
        case "history": try history(request, respond: respond)
        case "bans": respond(.json(try bans(request)))
        case "publish": try publish(try decode(AdminModels.PublishRequest.self, request), respond: respond)
        case "send": try send(try decode(AdminModels.SendRequest.self, request), respond: respond)
        case "disconnect": respond(.json(try disconnect(try decode(AdminModels.UserRequest.self, request))))
        case "kick": respond(.json(try kick(try decode(AdminModels.KickRequest.self, request))))
        case "ban": respond(.json(try ban(try decode(AdminModels.BanRequest.self, request))))
        case "unban": respond(.json(try unban(try decode(AdminModels.UserRequest.self, request))))
        case "revoke": respond(.json(try revoke(try decode(AdminModels.RevokeRequest.self, request))))
        default: preconditionFailure("endpoint '\(joined)' listed but not routed")
        }
    }

    /// A 405 with the `Allow` header RFC 9110 §15.5.6 asks for: the one method the endpoint takes.
    private static func notAllowed(_ request: AdminRequest, allowed: HTTPMethod) -> AdminResponse {
        var response = AdminResponse.error(.methodNotAllowed, "methodNotAllowed",
                                           "\(request.method) is not allowed on \(request.path): use \(allowed.rawValue)")
        response.extraHeaders = [("Allow", allowed.rawValue)]
        return response
    }

    // MARK: key

    /// Constant-time comparison: the time depends on the configured key's length only, never on
    /// where a wrong key first differs.
    static func keysMatch(_ given: String, _ expected: String) -> Bool {
        let given = Array(given.utf8), expected = Array(expected.utf8)
        var difference: UInt8 = given.count == expected.count ? 0 : 1
        for index in expected.indices {
            difference |= expected[index] ^ (index < given.count ? given[index] : 0)
        }
        return difference == 0
    }

    private func authorized(_ request: AdminRequest) -> Bool {
        guard let header = request.authorization else { return false }
        let prefix = "Bearer "
        guard header.count > prefix.count, header.prefix(prefix.count).lowercased() == prefix.lowercased() else { return false }
        return Self.keysMatch(String(header.dropFirst(prefix.count)), key)
    }

    // MARK: input

    /// Decodes a JSON body; a bad one is a 400 naming the problem. No field of a request body is
    /// nullable (`openapi/admin.yaml`): a field the body knows, given as `null`, is refused as a
    /// missing required one would be, naming the field and the type it takes.
    func decode<T: Decodable>(_ type: T.Type, _ request: AdminRequest) throws -> T {
        guard let body = request.body, body.readableBytes > 0 else { throw AdminFailure.badRequest("this endpoint needs a JSON body") }
        let data = Data(body.readableBytesView)
        let (marked, nullFields) = Self.markingNulls(data)
        do {
            return try JSONDecoder().decode(type, from: marked)
        } catch DecodingError.typeMismatch(let expected, let context)
                    where context.codingPath.count == 1 && nullFields.contains(context.codingPath[0].stringValue) {
            throw AdminFailure.badRequest(FrameCodec.decodingProblem(DecodingError.valueNotFound(expected, context)))
        } catch {
            // In our words, as for the WebSocket's frames: never Foundation's descriptions.
            throw AdminFailure.badRequest(FrameCodec.decodingProblem(error))
        }
    }

    /// A JSON object's top-level `null`s replaced by a value no request field takes (an object),
    /// so that decoding a field given as `null` fails with the type it takes, while a `null` under
    /// a key the body does not know is ignored like the key. Returns the body unchanged when it
    /// holds no such `null`, with the names of the fields that were `null`.
    static func markingNulls(_ data: Data) -> (Data, Set<String>) {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return (data, []) }
        let nullFields = Set(object.compactMap { key, value in value is NSNull ? key : nil })
        guard !nullFields.isEmpty else { return (data, []) }
        var marked = object
        for field in nullFields { marked[field] = ["null": true] }
        guard let reencoded = try? JSONSerialization.data(withJSONObject: marked) else { return (data, []) }
        return (reencoded, nullFields)
    }

    /// The app a request is about: the one named, or the only one the server serves.
    func app(_ named: String?) throws -> String {
        let apps = hub.configuration.apps
        if let named {
            guard !named.isEmpty else { throw AdminFailure.badRequest("appId is empty: name an app, or leave appId out") }
            guard apps[named] != nil else { throw AdminFailure.notFound("unknown app id '\(named)'", code: RTMErrorCode.invalidAppId.rawValue) }
            return named
        }
        guard apps.count == 1, let only = apps.keys.first else {
            throw AdminFailure.badRequest("appId is required: the server serves \(apps.count) apps")
        }
        return only
    }

    func channelName(_ name: String?) throws -> String {
        guard let name, !name.isEmpty else { throw AdminFailure.badRequest("missing field 'channel'") }
        if let problem = hub.configuration.limits.nameProblem(name, kind: "channel name") {
            throw AdminFailure.badRequest(problem, code: RTMErrorCode.invalidChannelName.rawValue)
        }
        return name
    }

    func userId(_ name: String?, field: String = "user") throws -> String {
        guard let name, !name.isEmpty else { throw AdminFailure.badRequest("missing field '\(field)'") }
        if let problem = hub.configuration.limits.nameProblem(name, kind: field) {
            throw AdminFailure.badRequest(problem, code: RTMErrorCode.invalidUserId.rawValue)
        }
        return name
    }

    /// A boolean query parameter (`true` or `false`); false when absent.
    func boolQuery(_ request: AdminRequest, _ name: String) throws -> Bool {
        switch request.query[name] {
        case nil, "false": return false
        case "true": return true
        case let other?: throw AdminFailure.badRequest("query parameter '\(name)' must be true or false, got '\(other)'")
        }
    }

    /// An integer query parameter in `range`, or `fallback` when absent.
    func intQuery(_ request: AdminRequest, _ name: String, _ fallback: Int64, _ range: ClosedRange<Int64>) throws -> Int64 {
        guard let text = request.query[name] else { return fallback }
        guard let value = Int64(text), range.contains(value) else {
            throw AdminFailure.badRequest("query parameter '\(name)' must be an integer in [\(range.lowerBound), \(range.upperBound)]")
        }
        return value
    }
}
