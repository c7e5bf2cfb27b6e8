import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The admin listener: HTTP/1.1 on its own address (`adminHost`:`adminPort`, loopback by
/// default), apart from the client endpoint, serving `AdminAPI` and the console; HTTPS with a
/// certificate (`adminTLSCertificatePath`).
final class AdminHTTPServer: Sendable {
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    /// The bound port, once started.
    var port: Int? { channel.withLockedValue { $0?.localAddress?.port } }

    /// Binds and starts answering. Returns the bound port.
    /// With `tls`, HTTPS only (a plain-HTTP request is answered with a 400 saying so).
    func start(group: any EventLoopGroup, host: String, port: Int, api: AdminAPI, idleTimeout: TimeAmount,
               tls: ServerTLS? = nil) async throws -> Int {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        try sync.addHandlers(PlainTextOnTLSPortHandler(reply: PlainTextOnTLSPortHandler.adminResponse),
                                             NIOSSLServerHandler(context: tls.current))
                    }
                    try sync.configureHTTPServerPipeline()
                    try sync.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try sync.addHandler(AdminHTTPHandler(api: api))
                }
            }
        let bound = try await bootstrap.bind(host: host, port: port).get()
        channel.withLockedValue { $0 = bound }
        return bound.localAddress?.port ?? port
    }

    /// Stops accepting (open admin connections end with their requests or their idle timeout).
    func stop() async {
        let bound = channel.withLockedValue { value in defer { value = nil }; return value }
        try? await bound?.close()
    }
}

/// Reads one request (head and body, at most `maxBody` bytes), has the API answer it, writes
/// the answer. Keep-alive as the client asks; pipelined requests are answered in order (NIO's
/// pipelining handler holds the next request until this one is answered).
final class AdminHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maxBody = 1 << 20
    private let api: AdminAPI
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var tooLarge = false

    init(api: AdminAPI) { self.api = api }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = nil
            tooLarge = false
        case .body(var chunk):
            guard !tooLarge else { return }
            if (body?.readableBytes ?? 0) + chunk.readableBytes > Self.maxBody {
                tooLarge = true
                body = nil
            } else if body == nil {
                body = chunk
            } else {
                body!.writeBuffer(&chunk)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            let keepAlive = head.isKeepAlive
            let channel = context.channel
            guard !tooLarge else {
                Self.write(.error(.payloadTooLarge, "payloadTooLarge", "the body is over \(Self.maxBody) bytes"), head: head,
                           keepAlive: false, on: channel)
                return
            }
            let request = AdminRequest(head: head, body: body, remote: "\(channel.remoteAddress.map { "\($0)" } ?? "?")")
            body = nil
            api.handle(request) { response in Self.write(response, head: head, keepAlive: keepAlive, on: channel) }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent { context.close(promise: nil) } else { context.fireUserInboundEventTriggered(event) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// Writes a response from any thread (the channel's pipeline is thread-safe to write to).
    private static func write(_ response: AdminResponse, head: HTTPRequestHead, keepAlive: Bool, on channel: any Channel) {
        var headers = HTTPHeaders([("Content-Type", response.contentType), ("Content-Length", "\(response.body.readableBytes)"),
                                   ("Cache-Control", "no-store"), ("Server", "rtm-admin")])
        for (name, value) in response.extraHeaders { headers.add(name: name, value: value) }
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        let responseHead = HTTPResponseHead(version: head.version, status: response.status, headers: headers)
        channel.write(HTTPServerResponsePart.head(responseHead), promise: nil)
        channel.write(HTTPServerResponsePart.body(.byteBuffer(response.body)), promise: nil)
        let done = channel.writeAndFlush(HTTPServerResponsePart.end(nil))
        if !keepAlive { done.whenComplete { _ in channel.close(promise: nil) } }
    }
}

@available(*, unavailable)
extension AdminHTTPHandler: Sendable {}
