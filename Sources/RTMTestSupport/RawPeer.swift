import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A peer on a raw TCP socket for tests of hostile or unusual clients: it writes exactly the
/// bytes it is given (an HTTP request, WebSocket frames masked as RFC 6455 asks, garbage, one
/// byte at a time) and records everything the server sends until the server closes.
public final class RawPeer: Sendable {
    private let channel: any Channel
    private let collector: Collector

    private init(channel: any Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    /// Connects to `127.0.0.1:port`.
    public static func connect(port: Int, host: String = "127.0.0.1",
                               group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> RawPeer {
        let collector = Collector()
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector.handler()) }
            }
            .connect(host: host, port: port).get()
        return RawPeer(channel: channel, collector: collector)
    }

    /// Writes bytes as they are.
    public func write(_ bytes: ByteBuffer) async throws {
        try await channel.writeAndFlush(bytes).get()
    }

    /// Writes a string's UTF-8 bytes as they are.
    public func write(_ text: String) async throws {
        try await write(ByteBuffer(string: text))
    }

    /// Everything received so far.
    public var received: ByteBuffer { collector.state.withLockedValue { $0.bytes } }

    /// Whether the server has closed the connection.
    public var isClosed: Bool { collector.state.withLockedValue { $0.closed } }

    /// When the connection closed (nil while open).
    public var closedAt: ContinuousClock.Instant? { collector.state.withLockedValue { $0.closedAt } }

    /// Waits until the server closes the connection; false if it is still open after `timeout`.
    public func waitForClose(within timeout: Duration) async -> Bool {
        await eventually(within: timeout, every: .milliseconds(5)) { isClosed }
    }

    /// Waits until the server closes the connection (or `timeout` passes) and returns the
    /// WebSocket frames it sent after its HTTP response.
    public func framesUntilClose(within timeout: Duration) async -> [WireFrame] {
        _ = await waitForClose(within: timeout)
        return frames()
    }

    /// The WebSocket frames received after the HTTP response head (server frames are unmasked).
    public func frames() -> [WireFrame] {
        var buffer = received
        guard let headEnd = buffer.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else { return [] }
        buffer.moveReaderIndex(to: headEnd.upperBound)
        return Self.frames(in: buffer)
    }

    /// The whole unmasked WebSocket frames at the start of `buffer` (a server's), in order; a
    /// frame cut short at the end is left out.
    public static func frames(in buffer: ByteBuffer) -> [WireFrame] {
        var buffer = buffer
        var out: [WireFrame] = []
        while let b0: UInt8 = buffer.getInteger(at: buffer.readerIndex),
              let b1: UInt8 = buffer.getInteger(at: buffer.readerIndex + 1) {
            var offset = 2
            var length = Int(b1 & 0x7F)
            if length == 126 {
                guard let value: UInt16 = buffer.getInteger(at: buffer.readerIndex + 2) else { break }
                length = Int(value); offset = 4
            } else if length == 127 {
                guard let value: UInt64 = buffer.getInteger(at: buffer.readerIndex + 2) else { break }
                length = Int(value); offset = 10
            }
            guard buffer.readableBytes >= offset + length else { break }
            buffer.moveReaderIndex(forwardBy: offset)
            out.append(WireFrame(opcode: b0 & 0x0F, payload: buffer.readBytes(length: length)!))
        }
        return out
    }

    /// Closes the socket from this side.
    public func close() async {
        try? await channel.close()
    }

    /// A frame as it went over the wire.
    public struct WireFrame: Sendable, Equatable {
        /// RFC 6455 opcode (1 text, 2 binary, 8 close, 9 ping, 10 pong).
        public let opcode: UInt8
        public let payload: [UInt8]

        /// The payload as text.
        public var text: String { String(decoding: payload, as: UTF8.self) }

        /// A close frame's status code.
        public var closeCode: UInt16? {
            guard opcode == 0x8, payload.count >= 2 else { return nil }
            return UInt16(payload[0]) << 8 | UInt16(payload[1])
        }
    }

    // MARK: building what a client sends

    /// The WebSocket upgrade request a real client sends for `/v1` with the `rtm.v1` subprotocol.
    public static func upgradeRequest(path: String = "/v1", subprotocol: String? = "rtm.v1") -> String {
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocol { request += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
        return request + "\r\n"
    }

    /// A client frame, masked with a random key as RFC 6455 §5.3 asks (`masked: false` for a
    /// frame that breaks the rule).
    public static func frame(opcode: UInt8, _ payload: some Collection<UInt8>, fin: Bool = true, masked: Bool = true) -> ByteBuffer {
        var out = ByteBuffer()
        appendFrame(to: &out, opcode: opcode, payload, fin: fin, masked: masked)
        return out
    }

    /// Appends a client frame to `out` (to pipeline many frames in one write), masked with
    /// `key` (a random one when nil) unless `masked` is false; `rsv` sets reserved bits.
    public static func appendFrame(to out: inout ByteBuffer, opcode: UInt8, _ payload: some Collection<UInt8>, fin: Bool = true,
                                   masked: Bool = true, key fixedKey: [UInt8]? = nil, rsv: UInt8 = 0) {
        out.writeInteger((fin ? 0x80 : 0) | rsv | opcode)
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            out.writeInteger(maskBit | UInt8(payload.count))
        } else if payload.count <= Int(UInt16.max) {
            out.writeInteger(maskBit | 126)
            out.writeInteger(UInt16(payload.count))
        } else {
            out.writeInteger(maskBit | 127)
            out.writeInteger(UInt64(payload.count))
        }
        guard masked else {
            out.writeBytes(payload)
            return
        }
        let key = fixedKey ?? (0..<4).map { _ in UInt8.random(in: 0...255) }
        out.writeBytes(key)
        var i = 0
        for byte in payload {
            out.writeInteger(byte ^ key[i & 3])
            i += 1
        }
    }

    /// A masked text frame.
    public static func text(_ text: String) -> ByteBuffer { frame(opcode: 0x1, Array(text.utf8)) }

    /// A masked close frame with a status code.
    public static func closeFrame(code: UInt16 = 1000) -> ByteBuffer { frame(opcode: 0x8, [UInt8(code >> 8), UInt8(code & 0xFF)]) }
}

/// Collects what the server sends, and notices its close.
private final class Collector: Sendable {
    struct State {
        var bytes = ByteBuffer()
        var closed = false
        var closedAt: ContinuousClock.Instant?
    }

    let state = NIOLockedValueBox(State())

    func handler() -> Handler { Handler(collector: self) }

    final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let collector: Collector

        init(collector: Collector) { self.collector = collector }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            collector.state.withLockedValue { _ = $0.bytes.writeBuffer(&bytes) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            let now = ContinuousClock.now
            collector.state.withLockedValue { $0.closed = true; $0.closedAt = now }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}

@available(*, unavailable)
extension Collector.Handler: Sendable {}
