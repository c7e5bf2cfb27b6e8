import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The WebSocket upgrade: NIO's `NIOWebSocketServerUpgrader` checks the request and builds the
/// 101 response (key, version, `Sec-WebSocket-Accept`, our subprotocol); the connection's
/// pipeline is ours: NIO's frame encoder, `ServerFrameDecoder`, NIO's protocol error handler,
/// `ConnectionHandler`.
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
        let (hub, maxFrameSize) = (self.hub, self.maxFrameSize)
        return context.eventLoop.makeCompletedFuture {
            let sync = context.pipeline.syncOperations
            try sync.addHandler(WebSocketFrameEncoder())
            try sync.addHandler(ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: maxFrameSize)))
            try sync.addHandler(WebSocketProtocolErrorHandler())
            try sync.addHandler(ConnectionHandler(hub: hub))
        }
    }
}
