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
/// - a WebSocket upgrade on `/v1` while draining → 503 with `Retry-After` (clients go elsewhere);
/// - anything else → 400 with a line saying what the endpoint expects.
final class NotUpgradedHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let hub: Hub

    init(hub: Hub) { self.hub = hub }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch path {
        case "/health":
            respond(.ok, "ok\n" + hub.cluster.healthDetail, version: head.version, context: context)
        case "/ready":
            if hub.isDraining {
                respond(.serviceUnavailable, "draining\n", version: head.version, context: context)
            } else {
                respond(.ok, "ready\n" + hub.cluster.healthDetail, version: head.version, context: context)
            }
        case "/metrics":
            let version = head.version
            hub.scrape(on: context.eventLoop).assumeIsolated().whenComplete { [self] result in
                switch result {
                case .success(let text):
                    respond(.ok, text, version: version, contentType: "text/plain; version=0.0.4; charset=utf-8", context: context)
                case .failure(let error):
                    respond(.internalServerError, "metrics unavailable: \(error)\n", version: version, context: context)
                }
            }
        case FrameCodec.path where hub.isDraining:
            respond(.serviceUnavailable, "server draining: connect to another node\n", version: head.version,
                    extraHeaders: [("Retry-After", "1")], context: context)
        default:
            respond(.badRequest, "expected a WebSocket upgrade on \(FrameCodec.path) with subprotocol \(FrameCodec.subprotocol)\n",
                    version: head.version, context: context)
        }
    }

    private func respond(_ status: HTTPResponseStatus, _ body: String, version: HTTPVersion, contentType: String = "text/plain",
                         extraHeaders: [(String, String)] = [], context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders([("Content-Type", contentType), ("Content-Length", "\(body.utf8.count)"), ("Connection", "close")])
        headers.add(name: "Server", value: "rtm")
        headers.add(contentsOf: extraHeaders)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        // The connection is now ending (its close deadline applies if the peer does not read).
        context.fireUserInboundEventTriggered(HTTPAnsweredEvent())
    }
}

@available(*, unavailable)
extension NotUpgradedHandler: Sendable {}
