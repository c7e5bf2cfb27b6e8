import NIOCore
import NIOWebSocket
import RTMProtocol

/// Where every frame a connection writes leaves: JSON and binary frames through the WebSocket
/// frame encoder, whole frames already encoded below it (the `ok`s and refusals gathered for a
/// read batch, replayed channel messages, user-message deliveries), the answers to the peer's
/// pings, and last the close frame. Each write is counted here, once (the loop's figures and
/// the connection's).
///
/// `ConnectionHandler.outbox` hands it out only while the connection may still send: that is
/// the one gate (nothing after the close frame, RFC 6455 §5.5.1; nothing to a socket being
/// dropped). The close frame is the one write past it (`closeFrame`), and the empty write that
/// waits for the last bytes to leave (`drained`). Writes from other threads (`Hub.send`) come
/// down the pipeline and meet the same gate in the handler's `write(context:data:promise:)`;
/// channel messages go from the loop's fan-out table, which the connection leaves when it
/// writes its close frame.
///
/// A value: the handler's pipeline contexts and the counters it adds to; confined to the
/// connection's event loop like its handler.
struct ConnectionOutbox {
    /// The handler's context: frames written here pass the WebSocket frame encoder.
    let context: ChannelHandlerContext
    /// Below the frame encoder (`RTMServer.rawHandlerName`), for frames already encoded; the
    /// handler's own context in a pipeline without it.
    let raw: ChannelHandlerContext
    /// The loop's traffic counts.
    let fanout: LoopFanout
    /// The connection's figures, from the WebSocket upgrade on.
    var connection: ConnectionRef?

    init(context: ChannelHandlerContext, raw: ChannelHandlerContext?, fanout: LoopFanout) {
        self.context = context
        self.raw = raw ?? context
        self.fanout = fanout
    }

    var allocator: ByteBufferAllocator { context.channel.allocator }

    /// A text frame whose payload (a JSON frame) is `payload`; flushed unless `flush` is false.
    func text(_ payload: ByteBuffer, flush: Bool = true) {
        count(payload.readableBytes)
        write(WebSocketFrame(fin: true, opcode: .text, data: payload), flush: flush)
    }

    /// A binary frame (the binary protocol's publish acknowledgements), flushed.
    func binary(_ payload: ByteBuffer) {
        count(payload.readableBytes)
        write(WebSocketFrame(fin: true, opcode: .binary, data: payload), flush: true)
    }

    /// The answer to a WebSocket ping (RFC 6455 §5.5.3: its application data back), flushed.
    func pong(_ data: ByteBuffer) {
        count(data.readableBytes)
        write(WebSocketFrame(fin: true, opcode: .pong, data: data), flush: true)
    }

    /// The `pong` answering a JSON heartbeat with `ts` (SPEC H-1), framed and written below the
    /// frame encoder in one buffer (one allocation, one piece for the socket), flushed; counted
    /// as its text, like `text`.
    func pong(ts: Int64?) {
        let length = FrameCodec.pongLength(ts: ts)
        var frame = allocator.buffer(capacity: length + 2)
        FrameCodec.writePong(ts: ts, framed: true, into: &frame)
        count(length)
        raw.writeAndFlush(NIOAny(frame), promise: nil)
    }

    /// `frames` whole WebSocket frames already encoded in `buffer`, written below the frame
    /// encoder; flushed unless `flush` is false (`flush()` follows a series).
    func encoded(_ buffer: ByteBuffer, frames: Int = 1, flush: Bool) {
        fanout.stats.bytesOut &+= buffer.readableBytes
        connection?.countOut(bytes: buffer.readableBytes, messages: frames)
        if flush {
            raw.writeAndFlush(NIOAny(buffer), promise: nil)
        } else {
            raw.write(NIOAny(buffer), promise: nil)
        }
    }

    /// Flushes what was written without flushing.
    func flush() {
        context.flush()
    }

    /// The close frame (`code`, `reason`), flushed; the future completes once it is written.
    /// The one write after the gate has shut (the state machine enters `ending` first).
    func closeFrame(code: WebSocketErrorCode, reason: String) -> EventLoopFuture<Void> {
        var data = allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        return context.writeAndFlush(NIOAny(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
    }

    /// Completes once everything written before it has left (an empty write below the frame and
    /// HTTP encoders): a plain HTTP answer is then complete and the socket may close.
    func drained() -> EventLoopFuture<Void> {
        raw.writeAndFlush(NIOAny(ByteBuffer()))
    }

    private func count(_ bytes: Int) {
        fanout.stats.bytesOut &+= bytes
        connection?.countOut(bytes: bytes)
    }

    private func write(_ frame: WebSocketFrame, flush: Bool) {
        if flush {
            context.writeAndFlush(NIOAny(frame), promise: nil)
        } else {
            context.write(NIOAny(frame), promise: nil)
        }
    }
}
