import Foundation
import NIOCore
import NIOPosix

/// Asks other nodes whether they reach the cluster's database: `GET /health` on each
/// ("host:port"), concurrently, each bounded by `timeout`; true as soon as one answers with
/// "database: up" (`PartitionWatch`). A node that cannot be reached or does not answer in time
/// counts as not reaching it.
enum PeerHealthProbe {
    static func anyReachesDatabase(_ peers: [String], loop: any EventLoop, timeout: TimeAmount) async -> Bool {
        await withTaskGroup(of: Bool.self) { tasks in
            for peer in peers {
                tasks.addTask { await health(of: peer, loop: loop, timeout: timeout)?.contains("database: up") ?? false }
            }
            for await up in tasks where up {
                tasks.cancelAll()
                return true
            }
            return false
        }
    }

    /// The answer to `GET /health` from `address` ("host:port", the host may be `[v6]`), at
    /// most 8 KB; nil when it cannot be had within `timeout`.
    static func health(of address: String, loop: any EventLoop, timeout: TimeAmount) async -> String? {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else { return nil }
        let host = address[..<colon].trimmingCharacters(in: ["[", "]"])
        let answer = loop.makePromise(of: String.self)
        let deadline = loop.scheduleTask(in: timeout) { answer.fail(ChannelError.connectTimeout(timeout)) }
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Reader(answer: answer)) }
            }
            .connect(host: host, port: port)
        connected.whenSuccess { channel in
            var request = channel.allocator.buffer(capacity: 64)
            request.writeString("GET /health HTTP/1.1\r\nHost: \(address)\r\nConnection: close\r\n\r\n")
            channel.writeAndFlush(request, promise: nil)
            answer.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
        connected.whenFailure { answer.fail($0) }
        defer { deadline.cancel() }
        return try? await answer.futureResult.get()
    }

    /// Collects the answer until it is whole, the peer closes, or 8 KB.
    private final class Reader: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private let answer: EventLoopPromise<String>
        private var text = ""

        init(answer: EventLoopPromise<String>) { self.answer = answer }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            text += String(buffer: unwrapInboundIn(data))
            if text.utf8.count > 8192 || isComplete { answer.succeed(text) }
        }

        /// The head and as much body as its Content-Length says (a server may keep the
        /// connection open whatever `Connection: close` asked).
        private var isComplete: Bool {
            guard let end = text.range(of: "\r\n\r\n") else { return false }
            let head = text[..<end.lowerBound].lowercased()
            guard let field = head.range(of: "content-length:") else { return false }
            let value = head[field.upperBound...].prefix { $0 != "\r" }.trimmingCharacters(in: .whitespaces)
            guard let length = Int(value) else { return false }
            return text[end.upperBound...].utf8.count >= length
        }

        func channelInactive(context: ChannelHandlerContext) {
            answer.succeed(text)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            answer.fail(error)
            context.close(promise: nil)
        }
    }
}
