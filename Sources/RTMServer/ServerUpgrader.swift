import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The WebSocket upgrade: NIO's `NIOWebSocketServerUpgrader` checks the request and builds the
/// 101 response (key, version, `Sec-WebSocket-Accept`, our subprotocol); the connection's
/// pipeline is ours: NIO's frame encoder, `ServerFrameDecoder`, NIO's protocol error handler,
/// inserted before the `ConnectionHandler` that has been at the end of the pipeline since the
/// accept (it keeps the connection's state and deadlines across the upgrade).
///
/// NIO's own decoder is never added: swapping it out after the fact races with the bytes a
/// client sends right behind its upgrade request (a `ByteToMessageHandler` leaves the pipeline
/// a tick after it is removed, and would decode them into frames our decoder cannot take).
struct ServerUpgrader: HTTPServerProtocolUpgrader, Sendable {
    let checks: NIOWebSocketServerUpgrader
    let maxFrameSize: Int
    let hub: Hub

    var supportedProtocol: String { checks.supportedProtocol }
    var requiredUpgradeHeaders: [String] { checks.requiredUpgradeHeaders }

    func buildUpgradeResponse(channel: any Channel, upgradeRequest: HTTPRequestHead,
                              initialResponseHeaders: HTTPHeaders) -> EventLoopFuture<HTTPHeaders> {
        checks.buildUpgradeResponse(channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    func upgrade(context: ChannelHandlerContext, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        let maxFrameSize = self.maxFrameSize
        return context.eventLoop.makeCompletedFuture {
            let sync = context.pipeline.syncOperations
            let handler = try sync.handler(type: ConnectionHandler.self)
            let handlerContext = try sync.context(handlerType: ConnectionHandler.self)
            try sync.addHandler(WebSocketFrameEncoder(), position: .before(handler))
            try sync.addHandler(ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: maxFrameSize)), position: .before(handler))
            try sync.addHandler(WebSocketProtocolErrorHandler(), position: .before(handler))
            // Before any frame is read: the frames a client sent right behind its upgrade
            // request are delivered once this returns.
            handler.upgraded(context: handlerContext)
        }
    }
}
