import Foundation
import Logging
import NIOCore
import NIOWebSocket
import RTMAuth
import RTMProtocol

/// One client connection after the WebSocket upgrade: reads frames, runs requests against the
/// `Hub`, supervises liveness (SPEC H-2, T-3) and reports loss for the grace window.
/// Confined to the connection's event loop.
final class ConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ServerInbound
    typealias OutboundOut = WebSocketFrame

    enum Phase {
        case awaitingLogin
        case active(UserKey)
        /// A joined STREAM connection.
        case stream(StreamMembership)
        /// Logged out, kicked, replaced or closing: no grace window on close.
        case ended
    }

    let hub: Hub
    var phase: Phase = .awaitingLogin
    var connection: ConnectionRef!
    var fanout: LoopFanout!
    var lastRead = NIODeadline.now()
    var publishLimiter: RateLimiter
    /// Channels this connection serves in its loop's fan-out table.
    var localChannels: Set<String> = []
    var context: ChannelHandlerContext?
    /// Writes pre-encoded WebSocket frames below the frame encoder (fan-out, replay).
    var rawContext: ChannelHandlerContext?
    /// Publishes of the current read batch (binary, and JSON ones the fast reader took).
    var pendingPublishes: [PendingPublish] = []
    /// The last channel published to: its name's bytes and validation result, to skip
    /// re-validating and re-allocating the name for every message of a stream.
    var lastPublishChannel: (bytes: [UInt8], name: String, problem: String?)?
    /// Set at login; kept after the session ends so the fan-out table can be cleaned.
    var appId: String?
    /// Set at login; kept after the session ends so the mailbox can be detached.
    var loggedInUser: String?
    /// Ends the session when the token expires unless it is renewed first.
    var tokenExpiry: Scheduled<Void>?
    /// Which connection counter this connection was added to.
    var counted: Counted = .none
    /// A STREAM connection's channel, once joined.
    var stream: StreamMembership?

    enum Counted { case none, message, stream }

    init(hub: Hub) {
        self.hub = hub
        self.publishLimiter = RateLimiter(ratePerSecond: hub.configuration.publishRatePerSecond)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.rawContext = try? context.pipeline.syncOperations.context(name: RTMServer.rawHandlerName)
        (connection, fanout) = hub.register(context.channel)
        lastRead = .now()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame: WebSocketFrame
        switch unwrapInboundIn(data) {
        case .binary(let messages):
            // Binary publishes are gathered and run together when the read batch ends (their
            // liveness stamp too, in channelReadComplete).
            for message in messages { binaryFrame(message, context: context) }
            return
        case .frame(let whole):
            frame = whole
        }
        // SPEC T-3: every inbound frame refreshes liveness. Publishes (the hot path) are
        // stamped once per read batch, in channelReadComplete; anything else at once. Frames
        // arrive unmasked (`ServerFrameDecoder`); binary ones only in `.binary` batches.
        switch frame.opcode {
        case .text:
            // A JSON publish joins the read's batch, like a binary one (stamped in channelReadComplete).
            if gatherJSONPublish(frame.data) { return }
            lastRead = .now()
            flushPublishes(context: context)   // keep the client's order of requests
            let payload = frame.data
            if let ts = FrameCodec.fastPing(payload) {
                // The heartbeat: answered without JSON machinery (idle servers mostly do this).
                let pong = FrameCodec.encodePong(ts: ts, allocator: context.channel.allocator)
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: pong)), promise: nil)
                return
            }
            let decoded: Frame
            do {
                decoded = try FrameCodec.decode(payload)
            } catch {
                send(.error(id: nil, .invalidFrame, error.description), context: context)
                return
            }
            handle(decoded, context: context)
        case .ping:
            lastRead = .now()
            var data = frame.data
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: data.readSlice(length: data.readableBytes) ?? ByteBuffer())
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            closeConnection(context: context, code: .normalClosure)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        lastRead = .now()
        flushPublishes(context: context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let idle as IdleStateHandler.IdleStateEvent where idle == .read:
            // T-1 on the server side: no login (or join) within the login deadline.
            hub.logger.info("login deadline passed", metadata: ["connection": "\(connection.id)"])
            context.close(mode: .all, promise: nil)
        case is SlowConsumerEvent:
            // Its backlog passed maxOutboundBytes: a close frame would only queue behind it, so
            // drop the connection now and release the memory (the client reconnects and resumes).
            hub.logger.warning("disconnecting slow consumer", metadata: ["connection": "\(connection.id)"])
            context.close(mode: .all, promise: nil)
        case let close as CloseWithFrameEvent:
            phase = .ended
            context.write(wrapOutboundOut(close.frame), promise: nil)
            closeConnection(context: context, code: .normalClosure)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        tokenExpiry?.cancel()
        switch counted {
        case .message: hub.counters.withLockedValue { $0.message -= 1 }
        case .stream: hub.counters.withLockedValue { $0.stream -= 1 }
        case .none: break
        }
        counted = .none
        if let stream { hub.streams.leave(stream, connection: connection, reason: .remoteLeave) }
        stream = nil
        leaveFanout()
        fanout.liveness.unwatch(connection.id)
        hub.unregister(connection)
        if let appId, let userId = loggedInUser {
            hub.mailbox.detach(UserKey(appId: appId, userId: userId), connection: connection)
        }
        if case .active = phase {
            hub.connectionLost(connection, lastSeen: lastRead)
        }
        phase = .ended
        context.fireChannelInactive()
    }

    /// SPEC H-2 / H-3 / H-5: nothing arrived within the connection's read timeout (heartbeat
    /// interval + slack, or the stream timeout); called by the loop's `LoopLiveness`.
    func readTimedOut() {
        hub.logger.info("heartbeat timeout", metadata: ["connection": "\(connection.id)"])
        context?.close(mode: .all, promise: nil)
    }

    /// From now on the connection is dropped after `timeout` without a read (replacing the
    /// login deadline).
    func superviseReads(timeout: TimeAmount, context: ChannelHandlerContext) {
        context.pipeline.syncOperations.removeHandler(name: RTMServer.idleHandlerName, promise: nil)
        fanout.liveness.watch(self, id: connection.id, timeout: timeout)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        hub.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: helpers

    func send(_ frame: Frame, context: ChannelHandlerContext) {
        let buffer = FrameCodec.encode(frame, allocator: context.channel.allocator)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: buffer)), promise: nil)
    }

    /// Sends a WebSocket close frame, then closes the socket; never waits on the peer.
    func closeConnection(context: ChannelHandlerContext, code: WebSocketErrorCode, reason: String = "") {
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
        // SPEC T-2 on the server side: a peer that does not read never holds the socket open.
        let channel = context.channel
        let deadline = context.eventLoop.scheduleTask(in: hub.configuration.closeTimeout) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in deadline.cancel() }
        context.writeAndFlush(wrapOutboundOut(frame)).assumeIsolated().whenComplete { _ in
            context.close(mode: .all, promise: nil)
        }
    }

    func joinFanout(_ channel: String, appId: String, features: ChannelFeatures = .presence) {
        let key = ChannelKey(appId: appId, name: channel)
        localChannels.insert(channel)
        // Adding again replaces the subscriber's options; only a first local subscriber changes the loop set.
        if fanout.add(connection, to: key, features: features, raw: rawContext) {
            hub.setLoop(fanout.index, hasSubscribers: true, channel: key)
        }
    }

    func leaveFanout(_ channel: String, appId: String) {
        guard localChannels.remove(channel) != nil else { return }
        let key = ChannelKey(appId: appId, name: channel)
        if fanout.remove(connection, from: key) { hub.setLoop(fanout.index, hasSubscribers: false, channel: key) }
    }

    private func leaveFanout() {
        guard let appId else { return }
        for channel in localChannels { leaveFanout(channel, appId: appId) }
    }
}

@available(*, unavailable)
extension ConnectionHandler: Sendable {}
