import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RTMTestSupport
import Testing
@testable import RTMServer

/// Frames sent right behind the upgrade request, in the same write, are read (not lost, no crash).
@Suite(.realTime, .serialized)
struct PipelinedUpgradeTests {
    final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let received = NIOLockedValueBox(ByteBuffer())
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            received.withLockedValue { _ = $0.writeBuffer(&bytes) }
        }
    }

    /// A raw TCP connection to the server on `port` and what it receives.
    static func connect(port: Int) async throws -> (any Channel, Collector) {
        let collector = Collector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) } }
            .connect(host: "127.0.0.1", port: port).get()
        return (channel, collector)
    }

    /// A valid upgrade request for `/v1`, subprotocol `rtm.v1`.
    static let upgradeRequest = ByteBuffer(string: "GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: rtm.v1\r\n\r\n")

    @Test("An upgrade request and a ping frame in one TCP write: the server upgrades, then answers the ping")
    func pipelinedFrame() async throws {
        let harness = try await Harness.start()
        let (channel, collector) = try await Self.connect(port: harness.port)
        var bytes = Self.upgradeRequest
        bytes.writeImmutableBuffer(JSONPublishTests.clientFrame(0x1, Array("{\"type\":\"ping\",\"ts\":7}".utf8)))
        try await channel.writeAndFlush(bytes)
        let received = { collector.received.withLockedValue { String(buffer: $0) } }
        let text = await firstValue(within: soon, every: .milliseconds(5)) {
            let text = received()
            return text.contains("pong") ? text : nil
        } ?? received()
        #expect(text.hasPrefix("HTTP/1.1 101"))
        #expect(text.contains("\"type\":\"pong\""))
        try? await channel.close()
    }
}
