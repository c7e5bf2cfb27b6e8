import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// One request per connection with NIO's HTTP/1 client handlers: webhook events and the
/// authorization hook's questions (POST), a cluster node's question to the others' `/health`
/// (GET, `PeerHealthProbe`).
///
/// Why not async-http-client: each needs one POST and its answer, nothing of a
/// general client (pooling, redirects, HTTP/2, proxies), and async-http-client would add its
/// own dependency tree to every build. One connection per POST also means no stale pooled
/// connection can eat a retry.
struct WebhookHTTPClient: Sendable {
    /// A parsed `http://` or `https://` URL.
    struct Target: Sendable {
        /// As the URL spells it (an IPv6 address in brackets): for the `Host` header.
        let host: String
        let port: Int
        let path: String
        let secure: Bool

        /// Parses `url`; nil when it is not an absolute http(s) URL with a host.
        init?(_ url: String) {
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
                  scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty else { return nil }
            secure = scheme == "https"
            self.host = host
            port = components.port ?? (secure ? 443 : 80)
            let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            self.path = components.percentEncodedQuery.map { "\(path)?\($0)" } ?? path
        }

        /// The host to connect to: an IPv6 address without its brackets.
        var connectHost: String { host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host }
    }

    let target: Target
    let timeout: TimeAmount
    let group: any EventLoopGroup
    private let tls: NIOSSLContext?

    init(target: Target, timeout: TimeAmount, group: any EventLoopGroup) throws {
        self.target = target
        self.timeout = timeout
        self.group = group
        tls = target.secure ? try NIOSSLContext(configuration: .makeClientConfiguration()) : nil
    }

    /// A complete response: its status and (up to `maxResponseBytes`) body.
    struct Reply: Sendable {
        let status: HTTPResponseStatus
        let body: ByteBuffer
    }

    /// The most of a response body kept; a longer one fails the request.
    static let maxResponseBytes = 64 * 1024

    /// POSTs `body` (JSON) with `headers`; the future holds the response, or fails (connect
    /// error, timeout, connection closed before a complete response, a body past
    /// `maxResponseBytes`). `timeout`: this request's own (nil: the client's).
    func post(body: Data, headers extra: [(String, String)], userAgent: String = "rtm-webhooks", timeout: TimeAmount? = nil) -> EventLoopFuture<Reply> {
        request(.POST, body: body, headers: extra, userAgent: userAgent, timeout: timeout)
    }

    /// GETs the target's path, with the same rules as `post`.
    func get(userAgent: String, timeout: TimeAmount? = nil) -> EventLoopFuture<Reply> {
        request(.GET, body: nil, headers: [], userAgent: userAgent, timeout: timeout)
    }

    private func request(_ method: HTTPMethod, body: Data?, headers extra: [(String, String)], userAgent: String,
                         timeout: TimeAmount?) -> EventLoopFuture<Reply> {
        let timeout = timeout ?? self.timeout
        let loop = group.next()
        let promise = loop.makePromise(of: Reply.self)
        let target = self.target
        let tls = self.tls
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        let isAddress = (try? SocketAddress(ipAddress: target.connectHost, port: 0)) != nil
                        try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: isAddress ? nil : target.host))
                    }
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(ResponseStatusHandler(promise: promise))
                }
            }
        let timer = loop.scheduleTask(in: timeout) {
            promise.fail(WebhookDeliveryError(reason: "no response within \(timeout)"))
        }
        promise.futureResult.whenComplete { _ in timer.cancel() }
        bootstrap.connect(host: target.connectHost, port: target.port).whenComplete { result in
            switch result {
            case .failure(let error):
                promise.fail(WebhookDeliveryError(reason: "connect to \(target.host):\(target.port) failed: \(WebhookDeliveryError.words(error))"))
            case .success(let channel):
                promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
                var headers = HTTPHeaders([("Host", target.port == (target.secure ? 443 : 80) ? target.host : "\(target.host):\(target.port)"),
                                           ("Connection", "close"), ("User-Agent", userAgent)])
                if let body { headers.add(contentsOf: [("Content-Type", "application/json"), ("Content-Length", "\(body.count)")]) }
                for (name, value) in extra { headers.add(name: name, value: value) }
                channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: method, uri: target.path, headers: headers)),
                              promise: nil)
                if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(bytes: body))), promise: nil) }
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            }
        }
        return promise.futureResult
    }
}

/// A webhook POST that got no usable answer.
struct WebhookDeliveryError: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }

    /// A connection error in our words: the system's text for an errno ("Connection refused"),
    /// a timeout named as one, anything else as NIO says it.
    static func words(_ error: any Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        if let connect = error as? NIOConnectionError, let first = connect.connectionErrors.first {
            return words(first.error)
        }
        if case ChannelError.connectTimeout = error { return "connecting timed out" }
        return "\(error)"
    }
}

/// Completes the promise with the response once the whole of it has arrived; fails it when the
/// connection ends first or errs, or the body is too long.
private final class ResponseStatusHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    private let promise: EventLoopPromise<WebhookHTTPClient.Reply>
    private var status: HTTPResponseStatus?
    private var body = ByteBuffer()

    init(promise: EventLoopPromise<WebhookHTTPClient.Reply>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = head.status
        case .body(var chunk):
            guard body.readableBytes + chunk.readableBytes <= WebhookHTTPClient.maxResponseBytes else {
                promise.fail(WebhookDeliveryError(reason: "the response body is longer than \(WebhookHTTPClient.maxResponseBytes) bytes"))
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&chunk)
        case .end:
            if let status { promise.succeed(WebhookHTTPClient.Reply(status: status, body: body)) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(WebhookDeliveryError(reason: "connection closed before a complete response"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(WebhookDeliveryError(reason: WebhookDeliveryError.words(error)))
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ResponseStatusHandler: Sendable {}
