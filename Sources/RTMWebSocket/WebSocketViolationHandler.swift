import NIOCore
import NIOWebSocket

/// Answers a protocol violation as RFC 6455 §7.1.7 asks: a close frame with the violation's
/// code (1002, 1007, 1009; ``WebSocketViolation``, or a `NIOWebSocketError` from NIO's frame
/// decoder), then the connection is closed, at the latest after `closeTimeout` if the peer does
/// not read. In place of NIO's `WebSocketProtocolErrorHandler`, which knows only NIO's errors.
///
/// Sits after whatever throws the violations; the violations it answers go no further (the
/// connection is ending), other errors pass on.
package final class WebSocketViolationHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = NIOAny
    package typealias OutboundOut = WebSocketFrame

    private let isServer: Bool
    private let closeTimeout: TimeAmount
    private var answered = false

    /// - Parameters:
    ///   - isServer: a server's close frame is unmasked, a client's masked (RFC 6455 §5.1).
    ///   - closeTimeout: how long the close frame may take to leave before the socket is closed anyway.
    /// Fired through the pipeline when a violation is answered (before the close frame is
    /// written): the connection is closing.
    package struct Answered: Sendable {
        /// The close code sent.
        package let code: WebSocketErrorCode
    }

    package init(isServer: Bool, closeTimeout: TimeAmount = .seconds(5)) {
        self.isServer = isServer
        self.closeTimeout = closeTimeout
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let violation: WebSocketViolation
        switch error {
        case let error as WebSocketViolation: violation = error
        case let error as NIOWebSocketError: violation = WebSocketViolation(error)
        case is ByteToMessageDecoderError where answered: return   // bytes that came after the violation
        default:
            context.fireErrorCaught(error)
            return
        }
        guard !answered else { return }
        answered = true
        // The handlers after this one learn that the connection is closing: nothing may follow
        // the close frame (RFC 6455 §5.5.1).
        context.fireUserInboundEventTriggered(Answered(code: violation.code))
        var data = context.channel.allocator.buffer(capacity: 2 + 123)
        data.write(webSocketErrorCode: violation.code)
        var reason = Substring(violation.description)   // a control frame holds 125 bytes
        while reason.utf8.count > 123 { reason = reason.dropLast() }
        data.writeString(String(reason))
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: isServer ? nil : .random(), data: data)
        let channel = context.channel
        let deadline = context.eventLoop.scheduleTask(in: closeTimeout) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in deadline.cancel() }
        context.writeAndFlush(wrapOutboundOut(frame)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

@available(*, unavailable)
extension WebSocketViolationHandler: Sendable {}
