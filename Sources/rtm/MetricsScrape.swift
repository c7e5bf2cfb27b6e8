import NIOCore
import NIOPosix

/// Reads one counter from a server's Prometheus endpoint (`GET /metrics`, on the WebSocket
/// port): what the benchmarks need of the server's own view (how many store commits a run made).
enum MetricsScrape {
    /// The sum of `name`'s samples (every label set), or nil if the server does not report it.
    static func counter(_ name: String, host: String, port: Int) async throws -> Double? {
        let body = try await get(path: "/metrics", host: host, port: port)
        var total: Double?
        for line in body.split(separator: "\n") where line.hasPrefix(name) && !line.hasPrefix("#") {
            let key = line.prefix { $0 != " " && $0 != "{" }
            guard key == name, let value = line.split(separator: " ").last.flatMap({ Double($0) }) else { continue }
            total = (total ?? 0) + value
        }
        return total
    }

    /// The body of an HTTP/1.0 GET (the server closes the connection after it).
    private static func get(path: String, host: String, port: Int) async throws -> String {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector()) }
            }
            .connect(host: host, port: port).get()
        try await channel.writeAndFlush(ByteBuffer(string: "GET \(path) HTTP/1.0\r\nHost: \(host)\r\n\r\n"))
        let text = try await channel.pipeline.handler(type: Collector.self).flatMap { collector in
            channel.closeFuture.map { collector.received }
        }.get()
        guard let split = text.range(of: "\r\n\r\n") else { return "" }
        return String(text[split.upperBound...])
    }

    /// Gathers what the server sends until it closes.
    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        var received = ""

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += String(buffer: unwrapInboundIn(data))
        }
    }
}
