import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import OpenAPIRuntime
import RTMAdminAPI
import RTMProtocol

/// The admin HTTP API (`openapi/admin.yaml`): checks the admin key (`Authorization: Bearer
/// <key>`, compared in constant time), finds the route the server code generated from the
/// document registered (`AdminRoutes`) and runs it against the hub (`AdminAPI+Endpoints`).
/// Every `/v1/…` endpoint needs the key; `GET /console` (the web console, which asks for the key
/// in the page) does not.
struct AdminAPI: Sendable {
    let hub: Hub
    let key: String
    let startedAt: Int64
    let node: String
    /// The routes of the operations, as the generated server code registered them.
    let routes = AdminRoutes()

    typealias Respond = @Sendable (AdminResponse) -> Void

    init(hub: Hub, key: String, startedAt: Int64, node: String) throws {
        self.hub = hub
        self.key = key
        self.startedAt = startedAt
        self.node = node
        // Compact answers, keys sorted (stable output), as the console polls them every second.
        try registerHandlers(on: routes, configuration: .init(jsonEncodingOptions: [.sortedKeys]))
    }

    /// Answers `request` (once its operation has run).
    func handle(_ request: AdminRequest, respond: @escaping Respond) {
        // "/" is the console's too.
        let segments = request.segments.isEmpty ? ["console"] : request.segments
        if segments.first == "v1" {
            guard authorized(request) else {
                hub.logger.warning("admin: request refused (\(request.authorization == nil ? "no" : "wrong") admin key)",
                                   metadata: ["method": "\(request.method)", "path": "\(request.path)", "remote": "\(request.remote)"])
                var response = AdminResponse.error(.unauthorized, "unauthorized",
                                                   request.authorization == nil ? "missing admin key (Authorization: Bearer <key>)" : "wrong admin key")
                response.extraHeaders = [("WWW-Authenticate", "Bearer realm=\"rtm-admin\"")]
                return respond(response)
            }
        } else if segments != ["console"] {
            return respond(.error(.notFound, "notFound", "no such endpoint: \(request.method) \(request.path) (the API is under /v1, the console at /console)"))
        }
        switch routes.match(method: request.method.rawValue, segments: segments) {
        case .notFound:
            respond(.error(.notFound, "notFound", "no such endpoint: \(request.method) \(request.path)"))
        case .methodNotAllowed(let allowed):
            // The `Allow` header RFC 9110 §15.5.6 asks for: the methods the endpoint takes.
            var response = AdminResponse.error(.methodNotAllowed, "methodNotAllowed",
                                               "\(request.method) is not allowed on \(request.path): use \(allowed.joined(separator: " or "))")
            response.extraHeaders = [("Allow", allowed.joined(separator: ", "))]
            respond(response)
        case .route(let handler, let parameters):
            let console = segments == ["console"]
            Task {
                var response = await Self.run(handler, request, segments: segments, parameters: parameters)
                if console, response.status == .ok {
                    response.contentType = "text/html; charset=utf-8"
                    response.extraHeaders = AdminConsolePage.headers
                }
                respond(response)
            }
        }
    }

    /// Runs a route's generated handler on `request`, as HTTP types, and reads its answer. A
    /// refusal comes back as the runtime's `ServerError` around what was refused: an
    /// `AdminFailure` from an endpoint, or what the document's types could not read.
    private static func run(_ handler: AdminRoutes.Handler, _ request: AdminRequest, segments: [String],
                            parameters: [String: String]) async -> AdminResponse {
        var fields = HTTPFields()
        for (name, value) in request.headers {
            if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        }
        let method = HTTPRequest.Method(request.method.rawValue) ?? .get
        let http = HTTPRequest(method: method, scheme: nil, authority: nil, path: request.encodedPath(segments), headerFields: fields)
        var body: HTTPBody?
        var nullFields: Set<String> = []
        if let bytes = request.body, bytes.readableBytes > 0 {
            let (marked, nulls) = markingNulls(Data(bytes.readableBytesView))
            body = HTTPBody(Array(marked))
            nullFields = nulls
        }
        let metadata = ServerRequestMetadata(pathParameters: parameters.mapValues { Substring(AdminRequest.encoded($0)) })
        do {
            let (response, responseBody) = try await handler(http, body, metadata)
            var data = Data()
            if let responseBody { data = try await Data(collecting: responseBody, upTo: .max) }
            return AdminResponse(status: HTTPResponseStatus(statusCode: response.status.code),
                                 contentType: response.headerFields[.contentType] ?? "application/json", body: ByteBuffer(bytes: data))
        } catch let error as ServerError {
            return refusal(error, request, nullFields: nullFields)
        } catch {
            return .error(.internalServerError, "internal", "the request could not be answered")
        }
    }

    /// The answer to a request an endpoint refused, or the document's types could not read, in
    /// our words: a field given as `null` (`nullFields`, which `markingNulls` replaced), a body
    /// or query parameter of the wrong type, a missing one.
    private static func refusal(_ error: ServerError, _ request: AdminRequest, nullFields: Set<String>) -> AdminResponse {
        switch error.underlyingError {
        case let failure as AdminFailure:
            return failure.response
        case DecodingError.typeMismatch(let expected, let context)
                where context.codingPath.count == 1 && nullFields.contains(context.codingPath[0].stringValue):
            return AdminFailure.badRequest(FrameCodec.decodingProblem(DecodingError.valueNotFound(expected, context))).response
        case is DecodingError where request.method == .GET:
            return AdminFailure.badRequest(queryProblem(request)).response
        case let decoding as DecodingError:
            return AdminFailure.badRequest(FrameCodec.decodingProblem(decoding)).response
        default:
            break
        }
        let status = HTTPResponseStatus(statusCode: error.httpStatus.code)
        let cause = error.causeDescription
        if let named = cause.range(of: "Missing required query parameter named: ") {
            return AdminFailure.badRequest("missing query parameter '\(cause[named.upperBound...])'").response
        }
        switch status {
        case .badRequest where cause.contains("request body"):
            return AdminFailure.badRequest("this endpoint needs a JSON body").response
        case .unsupportedMediaType:
            return .error(status, "unsupportedMediaType", "the body must be JSON (Content-Type: application/json)")
        case .notAcceptable:
            return .error(status, "notAcceptable", "this endpoint answers application/json: accept it")
        case .internalServerError:
            return .error(status, "internal", "the request could not be answered")
        default:
            return .error(status, "badRequest", "the request does not fit the admin API's document (openapi/admin.yaml)")
        }
    }

    /// A query parameter the document's types could not read (`limit=x`, `includeState=maybe`,
    /// an unknown `channelType`), named with the value given. The runtime's error does not name
    /// the parameter, so the typed ones are looked at here: each takes one kind of value.
    private static func queryProblem(_ request: AdminRequest) -> String {
        for parameter in typedQueryParameters {
            if let value = request.query[parameter.name], !parameter.fits(value) {
                return "query parameter '\(parameter.name)' must be \(parameter.expected), got '\(value)'"
            }
        }
        return "a query parameter has a value the admin API's document does not allow"
    }

    /// A query parameter of the document that is not a string: what it takes.
    private struct TypedQueryParameter: Sendable {
        let name: String
        let expected: String
        let fits: @Sendable (String) -> Bool
    }

    private static let typedQueryParameters: [TypedQueryParameter] = {
        let whole: @Sendable (String) -> Bool = { Int($0) != nil }
        let integers = ["limit", "count", "start", "end"].map { TypedQueryParameter(name: $0, expected: "a whole number (at most 64 bits)", fits: whole) }
        return integers + [
            TypedQueryParameter(name: "includeState", expected: "true or false", fits: { $0 == "true" || $0 == "false" }),
            TypedQueryParameter(name: "channelType", expected: "'message' or 'user'", fits: { $0 == "message" || $0 == "user" }),
        ]
    }()

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
}
