import NIOCore
import NIOHTTP1
import RTMProtocol

/// Answers a plain HTTP request that did not upgrade, then closes the connection:
///
/// - `GET /health` → 200 `ok` while the process serves at all (liveness);
/// - `GET /ready` → 200 `ready`, or 503 `draining` once `RTMServer.drain()` started (readiness:
///   a load balancer stops sending new clients);
/// - in cluster mode both bodies add a line `database: up` or `database: down` (the link to
///   the shared PostgreSQL, `ClusterStatus`); the status stays as above;
/// - `GET /metrics` → 200, every metric in the Prometheus text format (`ServerMetrics`);
///   these three answer `HEAD` too, and any other method with 405 and `Allow` (RFC 9110 §15.5.6);
/// - a WebSocket upgrade on `/v1` while draining → 503 with `Retry-After` (clients go elsewhere);
/// - any other request on `/v1` → what is wrong with it as an upgrade (`ServerUpgrader.refusal`):
///   405 for a method other than GET, 426 with `Sec-WebSocket-Version: 13` for another
///   WebSocket version (RFC 6455 §4.4), else 400 naming the missing or bad header;
/// - another path → 404 with a line listing the endpoints;
/// - a request that is not HTTP at all (NIO's parser gives up) → 400 with a line saying so.
final class NotUpgradedHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let hub: Hub
    /// A request head came in: it is (being) answered, and nothing else may be written.
    private var answering = false

    init(hub: Hub) { self.hub = hub }

    /// The paths answered without an upgrade.
    private static let plainPaths: Set<String> = ["/health", "/ready", "/metrics"]

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data), !answering else { return }
        answering = true
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let version = head.version
        let withBody = head.method != .HEAD
        if Self.plainPaths.contains(path), head.method != .GET, head.method != .HEAD {
            respond(.methodNotAllowed, "\(head.method) is not allowed on \(path): use GET\n", version: version,
                    extraHeaders: [("Allow", "GET, HEAD")], context: context)
            return
        }
        switch path {
        case "/health":
            respond(.ok, "ok\n" + hub.cluster.healthDetail, version: version, withBody: withBody, context: context)
        case "/ready":
            if hub.isDraining {
                respond(.serviceUnavailable, "draining\n", version: version, withBody: withBody, context: context)
            } else if hub.cluster.isCutOff {
                respond(.serviceUnavailable, "cut off\n" + hub.cluster.healthDetail, version: version, withBody: withBody, context: context)
            } else {
                respond(.ok, "ready\n" + hub.cluster.healthDetail, version: version, withBody: withBody, context: context)
            }
        case "/metrics":
            hub.scrape(on: context.eventLoop).assumeIsolated().whenComplete { [self] result in
                switch result {
                case .success(let text):
                    respond(.ok, text, version: version, withBody: withBody, contentType: "text/plain; version=0.0.4; charset=utf-8", context: context)
                case .failure(let error):
                    respond(.internalServerError, "metrics unavailable: \(error)\n", version: version, withBody: withBody, context: context)
                }
            }
        case FrameCodec.path where hub.isDraining:
            respond(.serviceUnavailable, "server draining: connect to another node\n", version: version,
                    extraHeaders: [("Retry-After", "1")], context: context)
        case FrameCodec.path:
            // NIO refused the upgrade (or it was none): say which header is missing or wrong.
            let refusal = ServerUpgrader.refusal(for: head)
                ?? UpgradeRefusal(status: .badRequest, reason: "the WebSocket upgrade could not be completed", headers: [:])
            respond(refusal.status, refusal.reason + "\n", version: version,
                    extraHeaders: refusal.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, context: context)
        default:
            respond(.notFound, "no such endpoint: \(path); the WebSocket endpoint is \(FrameCodec.path) (subprotocol \(FrameCodec.subprotocol)), "
                        + "and GET /health, /ready, /metrics\n", version: version, context: context)
        }
    }

    /// A request NIO's HTTP parser could not read (not HTTP, a broken header line): a 400 that
    /// says so, unless a request is being answered already; the connection closes once it is
    /// written. The error goes on (the connection handler notes the end).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError, !answering {
            answering = true
            respond(.badRequest, "not an HTTP request this server understands: expected a WebSocket upgrade on \(FrameCodec.path), "
                        + "or GET /health, /ready, /metrics\n", version: .http1_1, context: context)
        }
        context.fireErrorCaught(error)
    }

    /// Writes the answer (`withBody` false: a HEAD, the headers alone), then closes.
    private func respond(_ status: HTTPResponseStatus, _ body: String, version: HTTPVersion, withBody: Bool = true,
                         contentType: String = "text/plain", extraHeaders: [(String, String)] = [], context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders([("Content-Type", contentType), ("Content-Length", "\(body.utf8.count)"), ("Connection", "close")])
        headers.add(name: "Server", value: "rtm")
        headers.add(contentsOf: extraHeaders)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: status, headers: headers))), promise: nil)
        if withBody { context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        // The connection is now ending (its close deadline applies if the peer does not read).
        context.fireUserInboundEventTriggered(HTTPAnsweredEvent())
    }
}

@available(*, unavailable)
extension NotUpgradedHandler: Sendable {}
