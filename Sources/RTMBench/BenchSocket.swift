import NIOCore
import RTMAuth
import NIOPosix

/// What a benchmark connection speaks after the WebSocket upgrade.
public enum BenchTarget: Sendable, Equatable {
    /// This project's server: login, subscribe, binary publish / message frames.
    /// `capabilities`: each client also logs in with a capability token granting these
    /// (the cost of access control, `rtm bench --capability`).
    case rtm(appId: String, certificate: String?, capabilities: Capabilities? = nil)
    /// The reference floor server (`fanout-bench floor-server`): text `SUB` / `PUB`, answer
    /// `OK`, then raw binary frames.
    case floor
}

/// Receives a benchmark connection's WebSocket messages (on its event loop).
protocol BenchSocketDelegate: AnyObject {
    /// The upgrade is done.
    func opened(_ socket: BenchSocket)
    /// One complete message: opcode (1 text, 2 binary, 9 ping, 10 pong, 8 close) and payload
    /// (a view into the read buffer: no copy, valid during the call). `now` is one clock read
    /// per socket read.
    func message(_ socket: BenchSocket, opcode: UInt8, payload: ByteBuffer, now: UInt64)
    /// Every complete message of one read was handed over.
    func readComplete(_ socket: BenchSocket)
    /// The connection ended.
    func closed(_ socket: BenchSocket)
}

/// A lean WebSocket client connection for load generation: the upgrade written by hand, an
/// incremental frame parser reading straight from NIO's receive buffers (a partial frame is
/// kept until the rest arrives; nothing is allocated per message), and batched writes.
final class BenchSocket: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The peer that owns this socket (it outlives it: the run keeps every peer). Not weak:
    /// a weak load per message costs more than the rest of the parsing.
    unowned(unsafe) var delegate: (any BenchSocketDelegate)?
    private(set) var channel: (any Channel)?
    private var upgraded = false
    private var pending: ByteBuffer?
    /// The buffer of the last frame that spanned reads, kept for the next one.
    private var spare: ByteBuffer?
    let index: Int
    private let request: String
    /// Masks what this socket sends: a random key per frame, unless the run takes the
    /// `--unmasked-shortcut`.
    var masker: FrameMasker

    init(index: Int, host: String, port: Int, path: String, subprotocol: String?, unmasked: Bool = false) {
        self.index = index
        self.masker = FrameMasker(unmasked: unmasked)
        var request = "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocol { request += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
        self.request = request + "\r\n"
    }

    /// Connects on `loop` from local address `source` (spread over 127.0.0.x for many sockets).
    static func connect(_ socket: BenchSocket, host: String, port: Int, source: String?, loop: any EventLoop) -> EventLoopFuture<Void> {
        var bootstrap = ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(socket) }
            }
        if let source { bootstrap = bootstrap.bind(to: try! SocketAddress(ipAddress: source, port: 0)) }
        return bootstrap.connect(host: host, port: port).map { _ in }
    }

    func channelActive(context: ChannelHandlerContext) {
        channel = context.channel
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        delegate?.closed(self)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var input = unwrapInboundIn(data)
        if !upgraded {
            if var kept = pending {
                pending = nil
                kept.writeBuffer(&input)
                input = kept
            }
            guard let end = input.readableBytesView.firstRange(of: "\r\n\r\n".utf8) else { pending = input; return }
            let headLength = input.readableBytesView.distance(from: input.readableBytesView.startIndex, to: end.upperBound)
            let head = input.readString(length: headLength) ?? ""
            guard head.hasPrefix("HTTP/1.1 101") else { context.close(promise: nil); return }
            upgraded = true
            delegate?.opened(self)
        }
        let now = BenchClock.now()
        if var kept = pending {
            // A frame begun in an earlier read: only the bytes it lacks are copied to it; the
            // rest of this read is parsed where it lies. (`pending` let go first, so that the
            // kept bytes are not copied on write.)
            pending = nil
            while case let missing = Self.missingBytes(kept), missing > 0, input.readableBytes > 0 {
                var part = input.readSlice(length: min(missing, input.readableBytes))!
                kept.writeBuffer(&part)
            }
            if let (opcode, payload) = Self.nextFrame(&kept) {
                delegate?.message(self, opcode: opcode, payload: payload, now: now)
                spare = kept   // for the next frame that spans reads (fresh memory costs page faults)
            } else {
                pending = kept   // this read ended inside it too
            }
        }
        if pending == nil {
            while let (opcode, payload) = Self.nextFrame(&input) {
                delegate?.message(self, opcode: opcode, payload: payload, now: now)
            }
            if input.readableBytes > 0 {
                // A partial frame: its bytes so far, in a buffer that will hold all of it.
                let capacity = max(Self.frameBounds(input)?.size ?? 0, input.readableBytes, 4096)
                var rest: ByteBuffer
                if var reused = spare, reused.capacity >= capacity {
                    spare = nil
                    reused.clear()   // the frame read from it is gone: no copy
                    rest = reused
                } else {
                    rest = context.channel.allocator.buffer(capacity: capacity)
                }
                rest.writeBuffer(&input)
                pending = rest
            }
        }
        delegate?.readComplete(self)
    }

    /// How many more bytes the frame at the front of `buffer` needs before its size is known
    /// or it is complete (never more than that frame's own bytes): 0 when it is complete.
    static func missingBytes(_ buffer: ByteBuffer) -> Int {
        guard let b1: UInt8 = buffer.getInteger(at: buffer.readerIndex + 1) else { return 2 - buffer.readableBytes }
        guard let bounds = frameBounds(buffer) else { return headerSize(b1) - buffer.readableBytes }
        return max(0, bounds.size - buffer.readableBytes)
    }

    /// The header's size for a frame whose second byte is `b1` (servers do not mask; a mask
    /// key is tolerated anyway).
    private static func headerSize(_ b1: UInt8) -> Int {
        let lengthBytes = b1 & 0x7F == 126 ? 2 : b1 & 0x7F == 127 ? 8 : 0
        return 2 + lengthBytes + (b1 & 0x80 != 0 ? 4 : 0)
    }

    /// The header's size and the whole frame's for the frame at the front of `buffer`, once its
    /// header is there (nil before).
    static func frameBounds(_ buffer: ByteBuffer) -> (header: Int, size: Int)? {
        let start = buffer.readerIndex
        guard let b1: UInt8 = buffer.getInteger(at: start + 1) else { return nil }
        let header = headerSize(b1)
        guard buffer.readableBytes >= header else { return nil }
        switch b1 & 0x7F {
        case 126: return (header, header + Int(buffer.getInteger(at: start + 2, as: UInt16.self)!))
        case 127: return (header, header + Int(clamping: buffer.getInteger(at: start + 2, as: UInt64.self)!))
        case let length: return (header, header + Int(length))
        }
    }

    /// Parses one complete frame from the front of `buffer`, or nil (buffer untouched).
    static func nextFrame(_ buffer: inout ByteBuffer) -> (UInt8, ByteBuffer)? {
        let start = buffer.readerIndex
        guard let (header, size) = frameBounds(buffer), buffer.readableBytes >= size, let b0: UInt8 = buffer.getInteger(at: start),
              let payload = buffer.getSlice(at: start + header, length: size - header) else { return nil }
        buffer.moveReaderIndex(forwardBy: size)
        return (b0 & 0x0F, payload)
    }

    /// Sends one text frame (masked, as every frame this socket sends).
    func sendText(_ text: String) {
        guard let channel else { return }
        let length = text.utf8.count
        var buffer = channel.allocator.buffer(capacity: length + 14)
        masker.writeFrame(into: &buffer, opcode: 1, length: length) { $0.writeString(text) }
        channel.writeAndFlush(buffer, promise: nil)
    }

    /// Writes (and flushes) a buffer of ready frames.
    func send(_ buffer: ByteBuffer) {
        channel?.writeAndFlush(buffer, promise: nil)
    }

    func close() { channel?.close(promise: nil) }
}

// Confined to its event loop: other threads reach it only through `loop.execute` / `submit`.
extension BenchSocket: @unchecked Sendable {}

/// CLOCK_MONOTONIC in nanoseconds (the same clock in every process of the machine).
public enum BenchClock {
    /// Now.
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
