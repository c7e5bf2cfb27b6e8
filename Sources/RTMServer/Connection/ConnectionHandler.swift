import Atomics
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import RTMAuth
import RTMProtocol
import RTMWebSocket

/// One client connection, from the TCP accept to the close: it sits at the end of the pipeline
/// from the start (the HTTP handlers before it until the upgrade, the WebSocket frame decoder
/// after), reads frames, runs requests against the `Hub`, and performs what its
/// `ServerConnectionStateMachine` decides: every state's deadline (login, heartbeat (SPEC H-2,
/// T-3), close), which requests a state admits, and how the connection ends.
/// Confined to the connection's event loop.
final class ConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ServerInbound
    typealias OutboundIn = NIOAny
    typealias OutboundOut = WebSocketFrame

    let hub: Hub
    /// The connection's life (one state value; the handler only performs its actions). Any
    /// change may move its deadlines, so the loop's liveness sweep looks at it again.
    var lifecycle: ServerConnectionStateMachine {
        didSet {
            // Once per look of the sweep, not at every change (a publish changes the state);
            // not for a read (`noteRead`).
            if !livenessTouched, !readingOnly, let livenessSlot {
                livenessTouched = true
                fanout.liveness.touch(livenessSlot)
            }
        }
    }
    /// `noteRead` is changing `lifecycle`: the sweep is not told.
    private var readingOnly = false
    /// Its slot in the loop's liveness sweep (`LoopLiveness`), while watched.
    var livenessSlot: Int?
    /// The sweep has been told the state changed since it last looked here.
    var livenessTouched = false
    /// The hub's handle on this connection, from the upgrade on (nil for plain HTTP).
    var connection: ConnectionRef!
    /// Its event loop's fan-out table and counters.
    let fanout: LoopFanout
    /// What has been read and not yet run, and what reading carries from one frame to the
    /// next (`ConnectionIntake`).
    var intake = ConnectionIntake()
    /// Channels this connection serves in its loop's fan-out table (its state machine's).
    var localChannels: Set<String> { lifecycle.fanoutChannels }
    /// The pipeline contexts every write goes through, from the handler's addition to its
    /// removal (cleared then: a context holds its handler, so keeping it after that would keep
    /// both alive for ever, ~4.5 KB per connection never freed). Written to only through
    /// `outbox`, the gate, but for the close frame.
    private var wired: ConnectionOutbox?
    /// Where this connection's publishes go (`PublishPath`): numbered at once on one node,
    /// committed through the backplane in a cluster.
    let channelPublisher: any ConnectionPublisher

    /// The app of the session or stream membership the connection holds (closing: held), from
    /// its state.
    var appId: String? { lifecycle.held?.appId }
    /// What the session may do (its state's; `SessionAccess` decides every request).
    var access: SessionAccess? { lifecycle.access }
    /// A STREAM connection's channel, once joined (its state's).
    var stream: StreamMembership? { lifecycle.membership }
    /// The handler's context while it is in the pipeline.
    var context: ChannelHandlerContext? { wired?.context }
    /// Where this connection's frames go, while it may still send: nil once it is closing
    /// (nothing after the close frame, RFC 6455 §5.5.1; nothing to a socket being dropped) or
    /// before the handler is added and after it is removed. The one gate of every write.
    var outbox: ConnectionOutbox? { lifecycle.maySend ? wired : nil }

    /// A handler for a connection on `loop` (one of the hub's).
    init(hub: Hub, loop: any EventLoop) {
        self.hub = hub
        self.fanout = hub.fanout(for: loop)
        self.channelPublisher = hub.publishing.makeConnectionPublisher()
        let config = hub.configuration
        self.lifecycle = ServerConnectionStateMachine(
            acceptedAt: .now(), timeouts: .init(login: config.loginDeadline, close: config.closeTimeout),
            rates: hub.read { $0.connectionRates })
        hub.liveHandlers.wrappingIncrement(ordering: .relaxed)
    }

    deinit {
        hub.liveHandlers.wrappingDecrement(ordering: .relaxed)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        wired = ConnectionOutbox(context: context, raw: try? context.pipeline.syncOperations.context(name: RTMServer.rawHandlerName),
                                 fanout: fanout)
        lifecycle.read(at: .now())
        // Watched from the accept on: every state has a deadline.
        fanout.liveness.watch(self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        wired = nil
        connection?.detach()   // the reference cycle ends here
    }

    /// The WebSocket upgrade is done (called by `ServerUpgrader` right after it added the frame
    /// handlers, before any frame is read): the connection joins the hub.
    func upgraded(context: ChannelHandlerContext, userAgent: String? = nil) {
        lifecycle.upgraded()
        connection = hub.register(context.channel)
        wired?.connection = connection
        connection.userAgent = userAgent.map { String($0.prefix(200)) }
        connection.attach(self)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        intake.wholeFrame = true
        process(unwrapInboundIn(data), context: context)
    }

    /// Runs what the client sent: now, or after the authorization hook's answer when one is
    /// awaited (`held`: the client's order is kept).
    func process(_ inbound: ServerInbound, context: ChannelHandlerContext) {
        let frame: WebSocketFrame
        switch inbound {
        case .messages(let messages):
            // Publishes, binary and JSON, are gathered and run together when the read batch
            // ends (their liveness stamp too, in channelReadComplete); any other request runs
            // at once, after the publishes before it.
            for index in messages.indices {
                guard intake.held == nil else { return hold(.messages(Array(messages[index...]))) }
                if messages[index].isText {
                    guard textMessage(messages[index].data, context: context) else {
                        return hold(.messages(Array(messages[index...])))
                    }
                } else {
                    count(messages[index].data)
                    binaryFrame(messages[index].data, context: context)
                }
            }
            return
        case .frame(let control):
            guard intake.held == nil else { return hold(inbound) }
            frame = control
            count(control.data)
        }
        // SPEC T-3: every inbound frame refreshes liveness (publishes once per read batch, in
        // channelReadComplete; anything else at once). Frames arrive unmasked (`ServerFrameDecoder`).
        switch frame.opcode {
        case .ping:
            noteRead(at: .now())
            var data = frame.data
            outbox?.pong(data.readSlice(length: data.readableBytes) ?? ByteBuffer())
        case .connectionClose:
            // RFC 6455 §5.5.1: answer with the client's own code (the decoder checked it), then close.
            closeConnection(context: context, code: WebSocketRules.closeReplyCode(frame.data), cause: .clientClose)
        default:
            break
        }
    }

    /// Counts a message or control frame read.
    private func count(_ data: ByteBuffer) {
        fanout.stats.bytesIn &+= data.readableBytes
        connection.bytesIn &+= data.readableBytes
        connection.messagesIn &+= 1
    }

    /// A text message (a JSON request): a publish joins the read's batch, anything else runs now,
    /// after the publishes before it. False if it must wait, with what follows it, for the
    /// authorization hook's answer about one of those (nothing of it was run or counted).
    private func textMessage(_ payload: ByteBuffer, context: ChannelHandlerContext) -> Bool {
        // The heartbeat is told apart first: it is what an idle connection sends, and its
        // check fails at its first bytes for anything else.
        let ping = FrameCodec.fastPing(payload)
        if ping == nil, gatherJSONPublish(payload) {   // stamped in channelReadComplete, like a binary one
            count(payload)
            return true
        }
        flushPublishes(context: context)   // keep the client's order of requests
        guard intake.held == nil else { return false }   // behind a publish the hook is asked about
        count(payload)
        noteRead(at: .now())   // before any request runs: the publish rate and the replies count from it
        if let ts = ping {
            // The heartbeat (SPEC H-1): answered without JSON machinery, as one framed buffer
            // (idle servers mostly do this).
            outbox?.pong(ts: ts)
            return true
        }
        let decoded: Frame
        do {
            decoded = try FrameCodec.decode(payload)
        } catch {
            send(.error(id: error.requestID, .invalidFrame, error.description), context: context, operation: RefusalKey.unknownOperation)
            return true
        }
        let started = NIODeadline.now()
        intake.operation = decoded.type
        handle(decoded, context: context)
        hub.metrics.request(decoded.type, nanoseconds: (NIODeadline.now() - started).nanoseconds)
        return true
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Only whole frames are signs of life: bytes of a frame still open are not (a peer
        // could hold one open for ever, a byte at a time).
        guard intake.wholeFrame else { return context.fireChannelReadComplete() }
        intake.wholeFrame = false
        noteRead(at: .now())
        if lifecycle.isReportedSilent, let key = lifecycle.spoke() {
            hub.peerSilence(key, connection: connection, silent: false)   // §1.7: online again
        }
        flushPublishes(context: context)
        context.fireChannelReadComplete()
    }

    /// A whole frame was read at `now` (SPEC T-3). A read only moves the deadlines later, so
    /// the loop's sweep needs no look: it is told when to look next (`nextCheck`, computed here
    /// while the connection is in the cache) unless a change already asked for a look. An idle
    /// connection that keeps pinging is then never looked at by the sweep (each look touched
    /// memory no read needs, and with 15,000 connections none of it is in a cache).
    func noteRead(at now: NIODeadline) {
        readingOnly = true
        lifecycle.read(at: now)
        readingOnly = false
        if !livenessTouched, let livenessSlot {
            fanout.liveness.postpone(livenessSlot, until: lifecycle.nextCheck)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is WebSocketViolationHandler.Answered:
            // Its close frame is on its way and the violation handler closes the socket.
            lifecycle.violationAnswered(now: .now())
            leaveFanout()
        case is HTTPAnsweredEvent:
            run(lifecycle.httpAnswered(now: .now(), closesItself: true), context: context)
        case is SlowConsumerEvent:
            // Its backlog passed maxOutboundBytes: a close frame would only queue behind it, so
            // drop the connection now and release the memory (the client reconnects and resumes).
            guard lifecycle.maySend else { return }   // already cut off (one event per blocked write)
            let (log, suppressed) = hub.slowConsumerLog.admit(now: .now())
            if log {
                hub.logger.warning("disconnecting slow consumer", metadata: ["connection": "\(connection.id)", "more since the last line": "\(suppressed)"])
            }
            hub.metrics.slowConsumerDropped()
            run(lifecycle.lost(now: .now(), cause: .slowConsumer), context: context)
        case let close as CloseWithFrameEvent:
            guard let outbox else { return }   // already closing
            outbox.text(close.frame.data, flush: false)
            closeConnection(context: context, code: close.code, reason: close.reason)
        case let replaced as ReplacedEvent:
            // The session went on elsewhere (a resume, C-4; a rejoin; a logout): this one is stale.
            closeConnection(context: context, code: .normalClosure, reason: replaced.reason)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fanout.liveness.unwatch(self)
        let closed = lifecycle.socketClosed()
        guard let connection else {   // plain HTTP, or closed before the upgrade finished
            context.fireChannelInactive()
            return
        }
        hub.metrics.disconnected(closed.cause)
        // What the connection held, released once (a stream leave already made is a no-op).
        switch closed.held {
        case .session(let key, _)?:
            hub.countConnection(.message, opened: false)
            leaveFanout(appId: key.appId)
        case .member(let membership)?:
            hub.countConnection(.stream, opened: false)
            hub.streams.leave(membership, connection: connection, reason: .remoteLeave)
        case nil:
            break
        }
        hub.unregister(connection)
        hub.moderation.closed(connection: connection.id)
        if case .session(let key, _)? = closed.held {
            hub.mailbox.detach(key, connection: connection)
        }
        if closed.lostSession != nil {
            hub.connectionLost(connection, lastSeen: lifecycle.lastRead)
            // §1.7: unreachable once its silence passes the threshold, unless the session comes back first.
            if case .session(let key, let threshold)? = closed.held {
                hub.peerConnectionLost(key, lastSeen: lifecycle.lastRead, threshold: threshold, loop: fanout.index)
            }
        }
        context.fireChannelInactive()
    }

    /// When this connection is due (its state's deadline); read by the loop's `LoopLiveness`.
    var deadline: NIODeadline? { lifecycle.deadline }

    /// The state's deadline passed (login, heartbeat (SPEC H-2, H-3, H-5), or close); called by
    /// the loop's `LoopLiveness`.
    func deadlinePassed(now: NIODeadline) {
        guard let context else { return }
        let action = lifecycle.deadlinePassed(now: now)
        if action != .tokenExpired {
            hub.logger.info("deadline passed", metadata: ["connection": "\(connection?.id ?? 0)", "state": "\(lifecycle.state)"])
        }
        run(action, context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        hub.logger.debug("connection error", metadata: ["error": "\(error)"])
        switch error {
        case is HTTPParserError:
            // NIO's protocol error handler has written a 400; nobody else closes the socket.
            run(lifecycle.httpAnswered(now: .now(), closesItself: false), context: context)
        case is NIOWebSocketUpgradeError:
            // The upgrade was refused; the request goes on to `NotUpgradedHandler` (a 400).
            break
        default:
            run(lifecycle.lost(now: .now()), context: context)
        }
    }

    /// Writes from elsewhere (`Hub.send`: replies from the storage queues, presence events,
    /// user messages) pass here: once the connection is closing they are dropped, so nothing
    /// follows the close frame (RFC 6455 §5.5.1). Pre-encoded fan-out frames go below this
    /// handler; the connection leaves the fan-out tables when it sends its close frame.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard outbox != nil else {
            promise?.fail(ChannelError.outputClosed)
            return
        }
        context.write(data, promise: promise)
    }

    /// A whole WebSocket frame, already encoded (user-message replies and deliveries, from
    /// `UserMailbox`'s loop work): written below the frame encoder, like fan-out frames, not
    /// flushed (the mailbox flushes its batch), and dropped once the connection is closing.
    func writeEncoded(_ frame: ByteBuffer) {
        outbox?.encoded(frame, flush: false)
    }

    /// Performs what the state machine decided.
    func run(_ action: ServerConnectionStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .dropConnection:
            context.close(mode: .all, promise: nil)
        case .closeAfterFlush:
            guard let wired else { return context.close(mode: .all, promise: nil) }
            wired.drained().assumeIsolated().whenComplete { _ in context.close(mode: .all, promise: nil) }
        case .tokenExpired:
            tokenExpired(context: context)
        case .closeWebSocket(let code, let reason):
            leaveFanout()   // no channel message after the close frame either
            guard let wired else { return context.close(mode: .all, promise: nil) }
            // If the peer does not read, the `ending` deadline closes the socket (SPEC T-2).
            wired.closeFrame(code: code, reason: reason).assumeIsolated().whenComplete { _ in
                context.close(mode: .all, promise: nil)
            }
        }
    }

    // MARK: helpers

    /// Sends a frame; a refusal is counted by `operation` (default: the request being run).
    func send(_ frame: Frame, context: ChannelHandlerContext, operation: FrameType? = nil) {
        guard outbox != nil else { return }   // nothing after our close frame
        if frame.type == .error, let code = frame.code {
            fanout.stats.refused[RefusalKey(operation: operation ?? intake.operation, code: code), default: 0] &+= 1
            if let spent = lifecycle.errorReply(code: code, now: .now()) {
                return closeForRejectedRequests(spent, context: context)
            }
        }
        let buffer: ByteBuffer
        if frame.type == .error, let code = frame.code, let reason = frame.reason, frame == Frame(type: .error, id: frame.id, code: code, reason: reason) {
            // A refusal: written by hand (a flood gets thousands; the JSON encoder cost more
            // than everything else the server did for them).
            var out = context.channel.allocator.buffer(capacity: 64 + reason.utf8.count)
            FrameCodec.writeError(id: frame.id, code: code, reason: reason, into: &out)
            buffer = out
        } else {
            buffer = FrameCodec.encode(frame, allocator: context.channel.allocator)
        }
        outbox?.text(buffer)
    }

    /// The error budget is spent (`ServerConnectionStateMachine.errorReply`): performs the
    /// close the machine decided. The warning is one line per 10 s (a flood's connections come
    /// by the hundred a second; `rtm_disconnects_total` counts each).
    func closeForRejectedRequests(_ close: ServerConnectionStateMachine.Action, context: ChannelHandlerContext) {
        let (log, suppressed) = hub.abuseLog.admit(now: .now())
        if log {
            hub.logger.warning("closing a connection that keeps sending rejected requests",
                               metadata: ["connection": "\(connection?.id ?? 0)", "more since the last line": "\(suppressed)"])
        }
        run(close, context: context)
    }

    /// Ends the connection by someone's will: a WebSocket close frame with `code`, then the
    /// socket closes (no grace window for its session); never waits on the peer.
    func closeConnection(context: ChannelHandlerContext, code: WebSocketErrorCode, reason: String = "", cause: DisconnectReason? = nil) {
        run(lifecycle.close(code: code, reason: reason, now: .now(), cause: cause), context: context)
    }

    func joinFanout(_ channel: String, appId: String, features: ChannelFeatures = .presence) {
        guard lifecycle.enterFanout(channel) else { return }   // closing: no channel message after the close frame
        let key = ChannelKey(appId: appId, name: channel)
        // Adding again replaces the subscriber's options; only a first local subscriber changes the loop set.
        if fanout.add(connection, to: key, features: features, raw: wired?.raw) {
            hub.setLoop(fanout.index, hasSubscribers: true, channel: key)
        }
    }

    func leaveFanout(_ channel: String, appId: String) {
        guard lifecycle.leaveFanout(channel) else { return }
        removeFromFanout(ChannelKey(appId: appId, name: channel))
    }

    /// Leaves every channel of this loop's fan-out table (no channel message after the close
    /// frame; the session ended).
    func leaveFanout(appId: String? = nil) {
        guard let appId = appId ?? self.appId else { return }
        for channel in lifecycle.leaveFanout() { removeFromFanout(ChannelKey(appId: appId, name: channel)) }
    }

    private func removeFromFanout(_ key: ChannelKey) {
        if fanout.remove(connection, from: key) { hub.setLoop(fanout.index, hasSubscribers: false, channel: key) }
    }
}

@available(*, unavailable)
extension ConnectionHandler: Sendable {}
