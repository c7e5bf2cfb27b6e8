import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import RTMProtocol
import RTMWebSocket

/// Opens one WebSocket connection to the server (TCP, HTTP upgrade with subprotocol `rtm.v1`)
/// and feeds its frames to the core. All on the core's event loop.
enum ClientTransport {
    struct Endpoint: Sendable, Equatable {
        let host: String
        let port: Int
        let path: String
        /// `wss://`: the connection runs over TLS.
        let secure: Bool
        /// The TLS context for a `wss://` endpoint (set by the client from its configuration).
        var tls: ClientTLS?

        /// Parses `ws://host:port[/path]` or `wss://host:port[/path]` (ports 80 and 443 by default).
        init?(_ url: String) {
            secure = url.hasPrefix("wss://")
            guard url.hasPrefix("ws://") || secure else { return nil }
            var rest = Substring(url.dropFirst(secure ? 6 : 5))
            var path = FrameCodec.path
            if let slash = rest.firstIndex(of: "/") {
                let given = String(rest[slash...])
                if given != "/" { path = given }
                rest = rest[..<slash]
            }
            var host = String(rest)
            var port = secure ? 443 : 80
            if host.hasPrefix("["), let close = host.firstIndex(of: "]") {   // [::1]:port
                let after = host[host.index(after: close)...]
                if after.hasPrefix(":"), let p = Int(after.dropFirst()) { port = p }
                host = String(host[host.index(after: host.startIndex)..<close])
            } else if let colon = host.lastIndex(of: ":") {
                guard let p = Int(host[host.index(after: colon)...]) else { return nil }
                port = p
                host = String(host[..<colon])
            }
            guard !host.isEmpty, (1...65535).contains(port) else { return nil }
            self.host = host
            self.port = port
            self.path = path
        }
    }

    /// Connects; `onFrame` gets each decoded frame, `onReady` runs once the upgrade is done,
    /// `onClose` runs exactly once when the connection ends (or never opened).
    /// `onFailure` runs before `onClose` when the attempt failed for a reason retrying cannot
    /// fix (an untrusted certificate, TLS against a plain port or the reverse; see
    /// `UpgradeProblemHandler`).
    static func connect(
        endpoint: Endpoint, eventLoop: any EventLoop, connectTimeout: TimeAmount, maxFrameSize: Int,
        onReady: @escaping @Sendable (any Channel) -> Void,
        onFrame: @escaping @Sendable (Frame?, String?) -> Void,
        onFailure: (@Sendable (RTMError) -> Void)? = nil,
        onClose: @escaping @Sendable (String) -> Void
    ) {
        open(endpoint: endpoint, eventLoop: eventLoop, connectTimeout: connectTimeout, maxFrameSize: maxFrameSize,
             subprotocol: FrameCodec.subprotocol, makeHandler: { ClientFrameHandler(onFrame: onFrame) },
             onReady: onReady, onFailure: onFailure, onClose: onClose)
    }

    /// The SDK's WebSocket layer under any message handler: TCP, the HTTP upgrade (offering
    /// `subprotocol`), NIO's frame codec, `ClientMessageAggregator` (RFC 6455's rules)
    /// and `WebSocketViolationHandler` (a violation is answered with a close frame and its
    /// code). The handler `makeHandler` makes gets whole messages and control frames as
    /// unmasked `WebSocketFrame`s: `ClientFrameHandler` in the SDK, an echo handler in the
    /// Autobahn|Testsuite run, so the suite checks exactly the layers the SDK runs.
    static func open(
        endpoint: Endpoint, eventLoop: any EventLoop, connectTimeout: TimeAmount, maxFrameSize: Int,
        maxFragments: Int = 64, subprotocol: String?,
        makeHandler: @escaping @Sendable () -> any ChannelHandler,
        onReady: @escaping @Sendable (any Channel) -> Void,
        onFailure: (@Sendable (RTMError) -> Void)? = nil,
        onClose: @escaping @Sendable (String) -> Void
    ) {
        let problem = ConnectionProblem()
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if endpoint.secure {
                        guard let tls = endpoint.tls else { throw RTMError(.invalidParameter, operation: "login", "wss:// without a TLS context") }
                        try channel.pipeline.syncOperations.addHandler(try tls.handler(host: endpoint.host))
                    }
                    let upgrader = NIOWebSocketClientUpgrader(
                        requestKey: NIOWebSocketClientUpgrader.randomRequestKey(),
                        maxFrameSize: maxFrameSize,
                        automaticErrorHandling: false,   // WebSocketViolationHandler answers NIO's errors and ours
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                let sync = channel.pipeline.syncOperations
                                sync.removeHandler(name: UpgradeProblemHandler.name, promise: nil)
                                try sync.addHandler(ClientMessageAggregator(maxFrameSize: maxFrameSize, maxFragments: maxFragments))
                                try sync.addHandler(WebSocketViolationHandler(isServer: false))
                                try sync.addHandler(makeHandler())
                                onReady(channel)
                            }
                        })
                    let config: NIOHTTPClientUpgradeSendableConfiguration = (upgraders: [upgrader], completionHandler: { _ in })
                    // Frames a server sends right behind its 101 arrive in the same read as the
                    // response: forwarded to the WebSocket decoder, not dropped (NIO's default;
                    // found by Autobahn, whose server sends a message at once).
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(leftOverBytesStrategy: .forwardBytes, withClientUpgrade: config)
                    try channel.pipeline.syncOperations.addHandler(UpgradeProblemHandler(problem: problem, secure: endpoint.secure),
                                                                   name: UpgradeProblemHandler.name)
                    try channel.pipeline.syncOperations.addHandler(CloseOnErrorHandler())
                }
            }
        bootstrap.connect(host: endpoint.host, port: endpoint.port).whenComplete { result in
            switch result {
            case .failure(let error):
                onClose("connect failed: \(error)")
            case .success(let channel):
                channel.closeFuture.whenComplete { _ in
                    if let error = problem.error {
                        onFailure?(error)
                        onClose(error.reason)
                    } else {
                        onClose("connection closed")
                    }
                }
                var headers = HTTPHeaders()
                headers.add(name: "Host", value: "\(endpoint.host):\(endpoint.port)")
                headers.add(name: "User-Agent", value: RTMVersion.userAgent)
                if let subprotocol { headers.add(name: "Sec-WebSocket-Protocol", value: subprotocol) }
                headers.add(name: "Content-Length", value: "0")
                let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: endpoint.path, headers: headers)
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            }
        }
    }

    /// Sends one frame, masked as a client must. A well-formed publish, user message or user
    /// acknowledgement goes in the compact binary form (PROTOCOL.md §2.3); everything else as
    /// JSON text.
    static func send(_ frame: Frame, on channel: any Channel) {
        if let buffer = binaryForm(frame, allocator: channel.allocator) {
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .binary, maskKey: .random(), data: buffer), promise: nil)
            return
        }
        let buffer = FrameCodec.encode(frame, allocator: channel.allocator)
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer), promise: nil)
    }

    /// The binary form of a `publish` or `sendUser` (without `storeInHistory`, which only JSON
    /// carries) or of an `ackUser` without a request id; nil for anything else.
    private static func binaryForm(_ frame: Frame, allocator: ByteBufferAllocator) -> ByteBuffer? {
        if frame.type == .ackUser, frame.id == nil, let upTo = frame.msgId {
            var buffer = allocator.buffer(capacity: 11)
            BinaryFrame.writeAckUser(into: &buffer, upTo: upTo)
            return buffer
        }
        guard frame.type == .publish || frame.type == .sendUser, frame.storeInHistory != true, let id = frame.id,
              let name = frame.type == .publish ? frame.channel : frame.userId, (frame.text == nil) != (frame.data == nil),
              name.utf8.count <= 255, (frame.customType?.utf8.count ?? 0) <= 255 else { return nil }
        var buffer = allocator.buffer(capacity: 32 + name.utf8.count + frame.payloadSize)
        if frame.type == .publish {
            BinaryFrame.writePublishHeader(into: &buffer, requestID: id, msgId: frame.msgId, channel: name,
                                           customType: frame.customType, isText: frame.text != nil)
        } else {
            BinaryFrame.writeSendUserHeader(into: &buffer, requestID: id, msgId: frame.msgId, receiver: name,
                                            customType: frame.customType, isText: frame.text != nil)
        }
        if let text = frame.text { buffer.writeString(text) } else { buffer.writeBytes(frame.data ?? Data()) }
        return buffer
    }
}

/// Decodes inbound WebSocket messages; answers WebSocket pings and close frames.
final class ClientFrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame
    private let onFrame: @Sendable (Frame?, String?) -> Void

    init(onFrame: @escaping @Sendable (Frame?, String?) -> Void) { self.onFrame = onFrame }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            do { onFrame(try FrameCodec.decode(frame.unmaskedData), nil) } catch { onFrame(nil, error.description) }
        case .binary:
            // Channel messages and publish acks come in the compact form; the core sees frames.
            do {
                switch try BinaryFrame.decode(frame.unmaskedData) {
                case .messages(let messages):
                    for m in messages {
                        var payload = m.payload
                        let text = m.isText ? payload.readString(length: payload.readableBytes) : nil
                        let data = m.isText ? nil : Data(payload.readableBytesView)
                        onFrame(Frame(type: .message, channel: m.channel, channelType: "message", publisher: m.publisher,
                                      text: text, data: data, customType: m.customType, seq: m.seq, ts: m.ts, epoch: m.epoch), nil)
                    }
                case .publishAcks(let acks):
                    for ack in acks { onFrame(Frame(type: .ok, id: ack.requestID, seq: ack.seq, epoch: ack.epoch), nil) }
                case .sendUserReplies(let replies):
                    for reply in replies {
                        // The JSON reply's fields: -11035 in `code` when the receiver is offline.
                        onFrame(Frame(type: .ok, id: reply.requestID, receiverOnline: reply.receiverOnline,
                                      code: reply.receiverOnline == false ? RTMErrorCode.channelReceiverOfflineButMessageStoreSucceeded.rawValue : nil,
                                      msgId: reply.msgId, stored: true), nil)
                    }
                case .userMessages(let epoch, let messages):
                    for m in messages {
                        var payload = m.payload
                        let text = m.isText ? payload.readString(length: payload.readableBytes) : nil
                        let data = m.isText ? nil : Data(payload.readableBytesView)
                        onFrame(Frame(type: .message, channelType: "user", publisher: m.publisher, text: text, data: data,
                                      customType: m.customType, ts: m.ts, msgId: m.msgId, epoch: epoch), nil)
                    }
                }
            } catch {
                onFrame(nil, error.description)
            }
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            // RFC 6455 §5.5.1: answer with the server's own code (the aggregator checked it), then close.
            let reply = WebSocketRules.closeReply(to: frame.data, isServer: false, allocator: context.channel.allocator)
            context.writeAndFlush(wrapOutboundOut(reply)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        default:
            onFrame(nil, nil)   // still a sign of life (T-3)
        }
    }
}

@available(*, unavailable)
extension ClientFrameHandler: Sendable {}

/// Closes the connection on any error (failed upgrade, protocol error), so nothing hangs.
final class CloseOnErrorHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension CloseOnErrorHandler: Sendable {}
