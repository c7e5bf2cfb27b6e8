import HTTPTypes
import NIOConcurrencyHelpers
import OpenAPIRuntime

/// The admin API's routes as the server code generated from `openapi/admin.yaml` registers them
/// (`APIProtocol.registerHandlers(on:)`): the `ServerTransport` the generator expects, over the
/// NIO admin listener (`AdminHTTPServer`). A route is a method and a path template
/// (`/v1/channels/{channel}`); `match` finds the one a request's path and method name, or says
/// why none does (no such path: 404; another method: 405 with the ones it takes).
final class AdminRoutes: ServerTransport, Sendable {
    typealias Handler = @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)

    private struct Route: Sendable {
        let method: HTTPRequest.Method
        /// The template's segments; a parameter's is its name in braces.
        let template: [Substring]
        let handler: Handler

        /// The path parameters when `segments` (percent-decoded) fit the template.
        func parameters(_ segments: [String]) -> [String: String]? {
            guard segments.count == template.count else { return nil }
            var parameters: [String: String] = [:]
            for (part, segment) in zip(template, segments) {
                if part.first == "{", part.last == "}" {
                    parameters[String(part.dropFirst().dropLast())] = segment
                } else if part != segment {
                    return nil
                }
            }
            return parameters
        }
    }

    /// What a request's path and method find.
    enum Match {
        /// The route's handler, and its path parameters (percent-decoded).
        case route(Handler, parameters: [String: String])
        /// The path is a route's, the method is not: the methods it takes.
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private let routes = NIOLockedValueBox<[Route]>([])

    func register(_ handler: @escaping Handler, method: HTTPRequest.Method, path: String) throws {
        routes.withLockedValue { $0.append(Route(method: method, template: path.split(separator: "/"), handler: handler)) }
    }

    /// The route for `method` on the path `segments` (percent-decoded).
    func match(method: String, segments: [String]) -> Match {
        let all = routes.withLockedValue { $0 }
        let onPath = all.compactMap { route in route.parameters(segments).map { (route, $0) } }
        guard !onPath.isEmpty else { return .notFound }
        guard let (route, parameters) = onPath.first(where: { $0.0.method.rawValue == method }) else {
            return .methodNotAllowed(allowed: onPath.map(\.0.method.rawValue))
        }
        return .route(route.handler, parameters: parameters)
    }
}
