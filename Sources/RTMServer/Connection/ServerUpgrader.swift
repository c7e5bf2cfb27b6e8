import struct Foundation.Data
import NIOCore
import NIOHTTP1
import RTMProtocol
import NIOWebSocket
import RTMWebSocket

/// The WebSocket upgrade: NIO's `NIOWebSocketServerUpgrader` checks the request and builds the
/// 101 response (key, version, `Sec-WebSocket-Accept`, our subprotocol); the connection's
/// pipeline is ours: NIO's frame encoder, `ServerFrameDecoder`, `WebSocketViolationHandler`
/// (a violation is answered with a close frame and its code, RFC 6455 §7.1.7), then the handler
/// that takes the messages: in the server, the `ConnectionHandler` that has been at the end of
/// the pipeline since the accept (it keeps the connection's state and deadlines across the
/// upgrade; the frame handlers go in before it); in the Autobahn|Testsuite run, an
/// echo handler, so the suite checks exactly the layers the server runs.
///
/// NIO's own decoder is never added: swapping it out after the fact races with the bytes a
/// client sends right behind its upgrade request (a `ByteToMessageHandler` leaves the pipeline
/// a tick after it is removed, and would decode them into frames our decoder cannot take).
struct ServerUpgrader: HTTPServerProtocolUpgrader, Sendable {
    let checks: NIOWebSocketServerUpgrader
    let maxFrameSize: Int
    /// Fragments a message may come in (RFC 6455 §5.4; more is a protocol error).
    let maxFragments: Int
    /// How long a close frame answering a violation may take to leave.
    let closeTimeout: TimeAmount
    /// Makes the handler that takes the decoded messages (`ServerInbound`), on the connection's
    /// loop; nil: the pipeline's `ConnectionHandler` takes them (the server).
    let makeHandler: (@Sendable () -> any ChannelHandler)?

    /// The server's upgrader: messages go to the pipeline's `ConnectionHandler`.
    init(checks: NIOWebSocketServerUpgrader, maxFrameSize: Int, hub: Hub) {
        self.checks = checks
        self.maxFrameSize = maxFrameSize
        self.maxFragments = 64
        self.closeTimeout = hub.configuration.closeTimeout
        self.makeHandler = nil
    }

    /// An upgrader whose messages go to the handler `makeHandler` makes (tests).
    init(checks: NIOWebSocketServerUpgrader, maxFrameSize: Int, maxFragments: Int = 64, closeTimeout: TimeAmount,
         makeHandler: @escaping @Sendable () -> any ChannelHandler) {
        self.checks = checks
        self.maxFrameSize = maxFrameSize
        self.maxFragments = maxFragments
        self.closeTimeout = closeTimeout
        self.makeHandler = makeHandler
    }

    var supportedProtocol: String { checks.supportedProtocol }
    var requiredUpgradeHeaders: [String] { checks.requiredUpgradeHeaders }

    func buildUpgradeResponse(channel: any Channel, upgradeRequest: HTTPRequestHead,
                              initialResponseHeaders: HTTPHeaders) -> EventLoopFuture<HTTPHeaders> {
        checks.buildUpgradeResponse(channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    func upgrade(context: ChannelHandlerContext, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        let (maxFrameSize, maxFragments, closeTimeout, makeHandler) = (self.maxFrameSize, self.maxFragments, self.closeTimeout, self.makeHandler)
        return context.eventLoop.makeCompletedFuture {
            let sync = context.pipeline.syncOperations
            let frameHandlers: [any ChannelHandler] = [
                WebSocketFrameEncoder(),
                ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: maxFrameSize, maxFragments: maxFragments)),
                WebSocketViolationHandler(isServer: true, closeTimeout: closeTimeout),
            ]
            if let makeHandler {
                try sync.addHandlers(frameHandlers + [makeHandler()])
                return
            }
            let handler = try sync.handler(type: ConnectionHandler.self)
            let handlerContext = try sync.context(handlerType: ConnectionHandler.self)
            for frameHandler in frameHandlers { try sync.addHandler(frameHandler, position: .before(handler)) }
            // Before any frame is read: the frames a client sent right behind its upgrade
            // request are delivered once this returns.
            handler.upgraded(context: handlerContext, userAgent: upgradeRequest.headers.first(name: "User-Agent"))
        }
    }
}

/// Why a request on the WebSocket endpoint cannot be upgraded, and the answer it gets: the
/// status, a one-line reason naming the problem, and the headers RFC 6455 and RFC 9110 ask for.
struct UpgradeRefusal: Sendable, Equatable {
    /// The HTTP status of the answer.
    let status: HTTPResponseStatus
    /// What is wrong, in one line (the answer's body).
    let reason: String
    /// Headers the answer must carry: `Allow` on a 405, `Sec-WebSocket-Version` on a version problem.
    let headers: [String: String]
}

extension ServerUpgrader {
    /// The WebSocket version this server speaks (RFC 6455).
    static let webSocketVersion = "13"

    /// What is wrong with `head` as an upgrade on the endpoint, checked in the order a client
    /// would fix it (RFC 6455 §4.2.1); nil when it can be upgraded. A request that is not an
    /// upgrade at all is told what the endpoint expects.
    static func refusal(for head: HTTPRequestHead) -> UpgradeRefusal? {
        let headers = head.headers
        let expected = "expected a WebSocket upgrade on \(FrameCodec.path) with subprotocol \(FrameCodec.subprotocol)"
        guard head.method == .GET else {
            return UpgradeRefusal(status: .methodNotAllowed, reason: "\(head.method) is not allowed on \(FrameCodec.path): \(expected) (GET)",
                                  headers: ["Allow": "GET"])
        }
        guard headers[canonicalForm: "Upgrade"].contains(where: { $0.lowercased() == "websocket" }) else {
            return UpgradeRefusal(status: .badRequest, reason: "\(expected) (Upgrade: websocket)", headers: [:])
        }
        let versions = headers[canonicalForm: "Sec-WebSocket-Version"]
        guard let version = versions.first else {
            return UpgradeRefusal(status: .badRequest, reason: "missing Sec-WebSocket-Version header: this server speaks WebSocket version \(webSocketVersion)",
                                  headers: ["Sec-WebSocket-Version": webSocketVersion])
        }
        guard versions.count == 1, version == webSocketVersion else {
            // RFC 6455 §4.4: a version the server does not speak gets 426 and the versions it does.
            return UpgradeRefusal(status: .upgradeRequired,
                                  reason: "unsupported WebSocket version \(versions.joined(separator: ", ")): this server speaks version \(webSocketVersion)",
                                  headers: ["Sec-WebSocket-Version": webSocketVersion])
        }
        let keys = headers[canonicalForm: "Sec-WebSocket-Key"]
        guard keys.count == 1, let key = keys.first else {
            let problem = keys.isEmpty ? "missing Sec-WebSocket-Key header" : "more than one Sec-WebSocket-Key header"
            return UpgradeRefusal(status: .badRequest, reason: "\(problem): a WebSocket upgrade sends one, 16 random bytes in base64",
                                  headers: [:])
        }
        guard Data(base64Encoded: String(key))?.count == 16 else {
            return UpgradeRefusal(status: .badRequest, reason: "Sec-WebSocket-Key must be 16 random bytes in base64, got '\(key)'", headers: [:])
        }
        guard headers[canonicalForm: "Sec-WebSocket-Protocol"].contains(where: { $0 == FrameCodec.subprotocol }) else {
            return UpgradeRefusal(status: .badRequest, reason: "\(expected) (Sec-WebSocket-Protocol: \(FrameCodec.subprotocol))", headers: [:])
        }
        return nil
    }
}
