import ArgumentParser
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// `rtm bench idle-floor`: the floor of `rtm bench idle`, which starts it as a child process and
/// measures it as it measures the server: WebSocket connections on NIO's own server pipeline
/// (HTTP upgrade, `WebSocketFrameDecoder`), each answering its client's pings and nothing else.
/// No login, no session, no deadlines, no hub: what holding idle connections costs at the least.
struct IdleFloor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle-floor",
        abstract: "The idle floor server (started by `rtm bench idle`): WebSocket connections that only answer pings.",
        shouldDisplay: false)
    @Option(help: "Port to listen on (127.0.0.1).") var port = 19_601
    @Option(help: "Event-loop threads (default: cores, as the server).") var threads: Int?

    func run() async throws {
        FileLimit.raise()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads ?? System.coreCount))
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOWebSocketServerUpgrader(
                        shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(PingAnswerer()) }
                        })
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        try await channel.closeFuture.get()
    }

    /// Answers the bench client's handshake (`SUB` → `OK`, the floor protocol's), its protocol
    /// pings (any other text, with a pong) and WebSocket pings; closes on a close frame.
    final class PingAnswerer: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.opcode {
            case .text:
                let handshake = frame.unmaskedData.readableBytes == 3
                let reply = context.channel.allocator.buffer(string: handshake ? "OK" : #"{"type":"pong"}"#)
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: reply)), promise: nil)
            case .ping:
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
            case .connectionClose:
                context.close(promise: nil)
            default:
                break
            }
        }
    }
}

@available(*, unavailable)
extension IdleFloor.PingAnswerer: Sendable {}
