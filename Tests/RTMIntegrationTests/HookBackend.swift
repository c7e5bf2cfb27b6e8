import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import RTMTestSupport

/// A tiny real HTTP server playing the app's backend for the authorization hook: it checks
/// each question's signature, records it, and answers as the test says (a JSON decision, an
/// error status, or nothing at all).
final class HookBackend: Sendable {
    /// One question as received.
    struct Question: Sendable {
        let event: String
        let userId: String
        let channel: String?
        let channelType: String?
        let payload: String?
        let payloadSize: Int?
        let signatureValid: Bool
    }

    /// How to answer.
    enum Answer: Sendable {
        /// 200 with this JSON body.
        case json(String)
        /// This status, empty body.
        case status(Int)
        /// No answer (the server's timeout ends the request).
        case silent
        /// 200 with this JSON body, after a delay.
        case delayed(String, TimeAmount)
    }

    let port: Int
    private let channel: any Channel
    private let questions: NIOLockedValueBox<[Question]>
    /// Questions being answered now, and the most at once.
    private let concurrency: NIOLockedValueBox<(now: Int, most: Int)>
    /// The answer to each question.
    let answer: NIOLockedValueBox<@Sendable (Question) -> Answer>

    private init(port: Int, channel: any Channel, questions: NIOLockedValueBox<[Question]>,
                 concurrency: NIOLockedValueBox<(now: Int, most: Int)>, answer: NIOLockedValueBox<@Sendable (Question) -> Answer>) {
        self.port = port
        self.channel = channel
        self.questions = questions
        self.concurrency = concurrency
        self.answer = answer
    }

    /// The most questions it was answering at once.
    var mostAtOnce: Int { concurrency.withLockedValue { $0.most } }

    /// Listens on 127.0.0.1 (a free port).
    static func start(secret: String, answer: @escaping @Sendable (Question) -> Answer) async throws -> HookBackend {
        let questions = NIOLockedValueBox<[Question]>([])
        let concurrency = NIOLockedValueBox((now: 0, most: 0))
        let answerBox = NIOLockedValueBox<@Sendable (Question) -> Answer>(answer)
        let key = SymmetricKey(data: Data(secret.utf8))
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(BackendHandler(key: key, questions: questions, concurrency: concurrency,
                                                                                  answer: answerBox))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        TestResources.register { try? await channel.close() }   // closed when the test ends, whatever it threw
        return HookBackend(port: channel.localAddress?.port ?? 0, channel: channel, questions: questions, concurrency: concurrency,
                           answer: answerBox)
    }

    var url: String { "http://127.0.0.1:\(port)/authorize" }

    func stop() async { try? await channel.close() }

    /// Every question so far, in arrival order.
    var received: [Question] { questions.withLockedValue { $0 } }
}

private final class BackendHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let key: SymmetricKey
    private let questions: NIOLockedValueBox<[HookBackend.Question]>
    private let concurrency: NIOLockedValueBox<(now: Int, most: Int)>
    private let answer: NIOLockedValueBox<@Sendable (HookBackend.Question) -> HookBackend.Answer>
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(key: SymmetricKey, questions: NIOLockedValueBox<[HookBackend.Question]>, concurrency: NIOLockedValueBox<(now: Int, most: Int)>,
         answer: NIOLockedValueBox<@Sendable (HookBackend.Question) -> HookBackend.Answer>) {
        self.key = key
        self.questions = questions
        self.concurrency = concurrency
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
            let object = (try? JSONSerialization.jsonObject(with: bytes)) as? [String: Any] ?? [:]
            let question = HookBackend.Question(
                event: object["event"] as? String ?? "", userId: object["userId"] as? String ?? "",
                channel: object["channel"] as? String, channelType: object["channelType"] as? String,
                payload: object["payload"] as? String, payloadSize: object["payloadSize"] as? Int,
                signatureValid: head?.headers.first(name: "X-RTM-Signature") == expected)
            questions.withLockedValue { $0.append(question) }
            concurrency.withLockedValue { $0.now += 1; $0.most = max($0.most, $0.now) }
            let (status, text): (HTTPResponseStatus, String)
            switch answer.withLockedValue({ $0 })(question) {
            case .json(let json): (status, text) = (.ok, json)
            case .status(let code): (status, text) = (HTTPResponseStatus(statusCode: code), "")
            case .silent: return
            case .delayed(let json, let delay):
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: delay) { loopBound.value.0.respond(.ok, json, context: loopBound.value.1) }
                return
            }
            respond(status, text, context: context)
        }
    }

    private func respond(_ status: HTTPResponseStatus, _ text: String, context: ChannelHandlerContext) {
        concurrency.withLockedValue { $0.now -= 1 }
        let headers = HTTPHeaders([("Content-Length", "\(text.utf8.count)"), ("Content-Type", "application/json")])
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

@available(*, unavailable)
extension BackendHandler: Sendable {}
