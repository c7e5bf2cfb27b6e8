import NIOCore
import NIOWebSocket
import RTMWebSocket

/// Applies RFC 6455 to the frames NIO's decoder reads from the server, with the rules the
/// server applies to its clients (`RTMWebSocket`): no reserved bits or unknown
/// opcodes (§5.2), no masked frame from a server (§5.1), fragments in order and at most
/// `maxFragments` of them (§5.4), text messages valid UTF-8 (§8.1), close frames well formed
/// (§5.5.1). Hands on whole messages and control frames, unmasked; a violation goes down the
/// pipeline as a `WebSocketViolation` for `WebSocketViolationHandler` to answer. In place of
/// `NIOWebSocketFrameAggregator`, which checks only the fragment sequence.
final class ClientMessageAggregator: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private let maxFrameSize: Int
    private var assembler: WebSocketMessageAssembler
    private var failed = false

    init(maxFrameSize: Int, maxFragments: Int = 64) {
        self.maxFrameSize = maxFrameSize
        self.assembler = WebSocketMessageAssembler(maxMessageSize: maxFrameSize, maxFragments: maxFragments)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        let frame = unwrapInboundIn(data)
        do {
            let reserved: UInt8 = (frame.rsv1 ? 0x40 : 0) | (frame.rsv2 ? 0x20 : 0) | (frame.rsv3 ? 0x10 : 0)
            try WebSocketRules.checkHeader(fin: frame.fin, reservedBits: reserved, opcode: UInt8(webSocketOpcode: frame.opcode),
                                           masked: frame.maskKey != nil, length: UInt64(frame.length),
                                           fromClient: false, maxFrameSize: maxFrameSize)
            if let message = try assembler.assemble(fin: frame.fin, opcode: frame.opcode, payload: frame.data) {
                context.fireChannelRead(wrapInboundOut(WebSocketFrame(fin: true, opcode: message.opcode, data: message.data)))
            }
        } catch {
            failed = true
            context.fireErrorCaught(error)
        }
    }
}

@available(*, unavailable)
extension ClientMessageAggregator: Sendable {}
