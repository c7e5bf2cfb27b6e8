import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import RTMServer
import RTMTestSupport

/// A tiny real HTTP server that takes webhook POSTs: it checks each signature
/// (HMAC-SHA256 of the body with the shared secret) and records the events in arrival order.
final class WebhookReceiver: Sendable {
    struct Received: Sendable {
        let event: WebhookEvent
        let signatureValid: Bool
        let attempt: Int
    }

    let port: Int
    private let channel: any Channel
    private let state: NIOLockedValueBox<[Received]>
    /// The status it answers with (tests make it fail for some users).
    let answer: NIOLockedValueBox<@Sendable (WebhookEvent) -> HTTPResponseStatus>

    private init(port: Int, channel: any Channel, state: NIOLockedValueBox<[Received]>,
                 answer: NIOLockedValueBox<@Sendable (WebhookEvent) -> HTTPResponseStatus>) {
        self.port = port
        self.channel = channel
        self.state = state
        self.answer = answer
    }

    /// Listens on 127.0.0.1:`port` (0 = any).
    static func start(port: Int = 0, secret: String) async throws -> WebhookReceiver {
        let state = NIOLockedValueBox<[Received]>([])
        let answer = NIOLockedValueBox<@Sendable (WebhookEvent) -> HTTPResponseStatus>({ _ in .ok })
        let key = SymmetricKey(data: Data(secret.utf8))
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ReceiverHandler(key: key, state: state, answer: answer))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        TestResources.register { try? await channel.close() }   // closed when the test ends, whatever it threw
        return WebhookReceiver(port: channel.localAddress?.port ?? port, channel: channel, state: state, answer: answer)
    }

    func stop() async { try? await channel.close() }

    /// Everything received so far, in arrival order (retries included).
    var received: [Received] { state.withLockedValue { $0 } }

    /// Each event once (the first arrival of each `eventId`), in arrival order.
    var unique: [WebhookEvent] {
        var seen = Set<String>()
        return received.map(\.event).filter { seen.insert($0.eventId).inserted }
    }

    /// The `X-RTM-Signature` header a body signed with `key` carries (webhooks, the
    /// authorization hook).
    static func signature(of body: Data, key: SymmetricKey) -> String {
        "sha256=" + HMAC<SHA256>.authenticationCode(for: body, using: key).map { String(format: "%02x", $0) }.joined()
    }

    /// Waits until `condition` holds for what was received; false after `timeout`.
    func wait(within timeout: Duration, until condition: ([Received]) -> Bool) async -> Bool {
        await eventually(within: timeout) { condition(received) }
    }
}

private final class ReceiverHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let key: SymmetricKey
    private let state: NIOLockedValueBox<[WebhookReceiver.Received]>
    private let answer: NIOLockedValueBox<@Sendable (WebhookEvent) -> HTTPResponseStatus>
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(key: SymmetricKey, state: NIOLockedValueBox<[WebhookReceiver.Received]>,
         answer: NIOLockedValueBox<@Sendable (WebhookEvent) -> HTTPResponseStatus>) {
        self.key = key
        self.state = state
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            let bytes = Data(body.readableBytesView)
            let expected = WebhookReceiver.signature(of: bytes, key: key)
            let signature = head?.headers.first(name: "X-RTM-Signature")
            var status = HTTPResponseStatus.badRequest
            if let event = try? JSONDecoder().decode(WebhookEvent.self, from: bytes) {
                status = answer.withLockedValue { $0 }(event)
                let received = WebhookReceiver.Received(event: event, signatureValid: signature == expected,
                                                        attempt: Int(head?.headers.first(name: "X-RTM-Attempt") ?? "") ?? 0)
                if status == .ok { state.withLockedValue { $0.append(received) } }
            }
            let headers = HTTPHeaders([("Content-Length", "0")])
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

@available(*, unavailable)
extension ReceiverHandler: Sendable {}
