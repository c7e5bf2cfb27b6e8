import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// One request per connection with NIO's HTTP/1 client handlers: webhook events and the
/// authorization hook's questions (POST), a cluster node's question to the others' `/health`
/// (GET, `PeerHealthProbe`), and `rtm admin`'s calls (`send`, with its own trust roots).
///
/// Why not async-http-client: each needs one POST and its answer, nothing of a
/// general client (pooling, redirects, HTTP/2, proxies), and async-http-client would add its
/// own dependency tree to every build. One connection per POST also means no stale pooled
/// connection can eat a retry.
package struct WebhookHTTPClient: Sendable {
    /// A parsed `http://` or `https://` URL.
    package struct Target: Sendable {
        /// As the URL spells it (an IPv6 address in brackets): for the `Host` header.
        package let host: String
        package let port: Int
        package let path: String
        package let secure: Bool

        /// Parses `url`; nil when it is not an absolute http(s) URL with a host.
        package init?(_ url: String) {
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
    /// The most of a response body kept; a longer one fails the request.
    private let maxResponseBytes: Int

    /// A client of `target`; for https, its certificate is checked against `trustRoots` (the
    /// system trust store by default).
    package init(target: Target, timeout: TimeAmount, group: any EventLoopGroup, trustRoots: NIOSSLTrustRoots = .default,
                 maxResponseBytes: Int = 64 * 1024) throws {
        self.target = target
        self.timeout = timeout
        self.group = group
        self.maxResponseBytes = maxResponseBytes
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = trustRoots
        tls = target.secure ? try NIOSSLContext(configuration: configuration) : nil
    }

    /// A complete response: its status, headers and (up to `maxResponseBytes`) body.
    package struct Reply: Sendable {
        package let status: HTTPResponseStatus
        package let headers: HTTPHeaders
        package let body: ByteBuffer
    }

    /// POSTs `body` (JSON) with `headers`; the future holds the response, or fails (connect
    /// error, timeout, connection closed before a complete response, a body past
    /// `maxResponseBytes`). `timeout`: this request's own (nil: the client's).
    func post(body: Data, headers extra: [(String, String)], userAgent: String = "rtm-webhooks", timeout: TimeAmount? = nil) -> EventLoopFuture<Reply> {
        send(.POST, body: body, headers: extra, userAgent: userAgent, timeout: timeout)
    }

    /// GETs the target's path, with the same rules as `post`.
    func get(userAgent: String, timeout: TimeAmount? = nil) -> EventLoopFuture<Reply> {
        send(.GET, body: nil, headers: [], userAgent: userAgent, timeout: timeout)
    }

    /// Sends `method` to the target's path with `body` (JSON, when there is one), with the same
    /// rules as `post`.
    package func send(_ method: HTTPMethod, body: Data?, headers extra: [(String, String)], userAgent: String,
                      timeout: TimeAmount? = nil) -> EventLoopFuture<Reply> {
        let timeout = timeout ?? self.timeout
        let loop = group.next()
        let promise = loop.makePromise(of: Reply.self)
        let target = self.target
        let tls = self.tls
        let maxResponseBytes = self.maxResponseBytes
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
                    try sync.addHandler(ResponseStatusHandler(promise: promise, maxResponseBytes: maxResponseBytes))
                }
            }
        let timer = loop.scheduleTask(in: timeout) {
            promise.fail(WebhookDeliveryError(reason: "no response within \(timeout)", tls: nil))
        }
        promise.futureResult.whenComplete { _ in timer.cancel() }
        bootstrap.connect(host: target.connectHost, port: target.port).whenComplete { result in
            switch result {
            case .failure(let error):
                promise.fail(WebhookDeliveryError(reason: "connect to \(target.host):\(target.port) failed: \(WebhookDeliveryError.words(error))",
                                                  tls: WebhookDeliveryError.TLSProblem(error)))
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

/// A request that got no usable answer.
package struct WebhookDeliveryError: Error, CustomStringConvertible {
    /// What went wrong with the server's TLS, when that is why.
    package enum TLSProblem: Sendable, Equatable {
        /// Its certificate does not chain to a trusted CA (or is outside its validity dates).
        case untrusted
        /// Its certificate does not name the host connected to.
        case wrongName
        /// It did not answer in TLS (a plain HTTP port).
        case notTLS

        init?(_ error: any Error) {
            if let ssl = error as? NIOSSLError {
                let text = "\(ssl)"
                if text.contains("CERTIFICATE_VERIFY_FAILED") { self = .untrusted; return }
                if text.contains("WRONG_VERSION_NUMBER") { self = .notTLS; return }
                return nil
            }
            if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname { self = .wrongName; return }
            return nil
        }
    }

    package let reason: String
    /// Set when the failure is the server's TLS.
    package let tls: TLSProblem?
    package var description: String { reason }

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
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()

    private let maxResponseBytes: Int

    init(promise: EventLoopPromise<WebhookHTTPClient.Reply>, maxResponseBytes: Int) {
        self.promise = promise
        self.maxResponseBytes = maxResponseBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body(var chunk):
            guard body.readableBytes + chunk.readableBytes <= maxResponseBytes else {
                promise.fail(WebhookDeliveryError(reason: "the response body is longer than \(maxResponseBytes) bytes", tls: nil))
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&chunk)
        case .end:
            if let head { promise.succeed(WebhookHTTPClient.Reply(status: head.status, headers: head.headers, body: body)) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(WebhookDeliveryError(reason: "connection closed before a complete response", tls: nil))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(WebhookDeliveryError(reason: WebhookDeliveryError.words(error), tls: WebhookDeliveryError.TLSProblem(error)))
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ResponseStatusHandler: Sendable {}
