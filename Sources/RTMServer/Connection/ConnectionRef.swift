import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import RTMAdminAPI

/// A handle on one client connection that any thread may hold: its id, its NIO channel
/// (thread-safe for writes and close) and the index of the event loop it lives on.
final class ConnectionRef: Sendable, Hashable {
    let id: UInt64
    let channel: any Channel
    let loopIndex: Int
    /// When the connection was upgraded (ms since the Unix epoch).
    let connectedAt: Int64
    /// Its traffic, counted on its event loop only (as `rtm_received_bytes_total` and
    /// `rtm_sent_bytes_total` are, so the connections' figures add up to the server's): the
    /// WebSocket messages it sent, the messages it was sent (each channel message counts, also
    /// when several share a frame), and their bytes. Read on its loop (`AdminConnection`).
    nonisolated(unsafe) var bytesIn = 0
    nonisolated(unsafe) var bytesOut = 0
    nonisolated(unsafe) var messagesIn = 0
    nonisolated(unsafe) var messagesOut = 0
    /// The client's `User-Agent` at the upgrade (the SDK sends `swift-rtm/VERSION`).
    nonisolated(unsafe) var userAgent: String?
    /// The grants of the MESSAGE session on this connection (set on its loop, read by its
    /// user's STREAM joins on theirs): a join without a capability token takes them.
    var sessionAccess: SessionAccess? {
        get { sessionAccessBox.withLockedValue { $0 } }
        set { sessionAccessBox.withLockedValue { $0 = newValue } }
    }
    private let sessionAccessBox = NIOLockedValueBox<SessionAccess?>(nil)
    /// The connection's handler, set by it on its loop and read only there: where pre-encoded
    /// frames go (`writeEncoded`). Held strongly until the handler leaves its pipeline
    /// (`detach`), which ends the cycle with the handler's own reference to this: a weak
    /// reference would give the handler a side table, and every retain of it (several per read)
    /// would take the runtime's slow path.
    private let handler: NIOLoopBoundBox<ConnectionHandler?>

    init(id: UInt64, channel: any Channel, loopIndex: Int) {
        self.id = id
        self.channel = channel
        self.loopIndex = loopIndex
        self.connectedAt = Int64(Date().timeIntervalSince1970 * 1000)
        self.handler = .makeEmptyBox(valueType: ConnectionHandler.self, eventLoop: channel.eventLoop)
    }

    /// On the connection's loop: its handler takes pre-encoded frames from now on.
    func attach(_ handler: ConnectionHandler) {
        self.handler.value = handler
    }

    /// On the connection's loop: its handler left the pipeline; nothing goes to it any more.
    func detach() {
        handler.value = nil
    }

    /// On the connection's loop: writes `frame`, a whole WebSocket frame already encoded (header
    /// and body in one buffer), below the frame encoder, without flushing; dropped once the
    /// connection sends its close frame (nothing may follow it). Without a handler (not attached,
    /// or gone), `fallback` is written through the pipeline instead.
    func writeEncoded(_ frame: ByteBuffer, fallback: @autoclosure () -> WebSocketFrame) {
        if let handler = handler.value {
            handler.writeEncoded(frame)
        } else {
            channel.write(fallback(), promise: nil)
        }
    }

    /// Counts what was written to the connection (on its loop).
    @inline(__always)
    func countOut(bytes: Int, messages: Int = 1) {
        bytesOut &+= bytes
        messagesOut &+= messages
    }

    /// The connection's figures for the admin API; on its loop (`fanout`: that loop's).
    func inspect(node: String, fanout: LoopFanout) -> Components.Schemas.Connection {
        let connectionHandler = handler.value
        let lastRead = connectionHandler?.lifecycle.lastRead
        // What its channels sent it is counted per channel; added here.
        let channels = connectionHandler.map { handler in handler.localChannels.map { ChannelKey(appId: handler.appId ?? "", name: $0) } } ?? []
        let subscribed = fanout.sentToSubscriptions(of: self, channels: channels)
        let idle = lastRead.map { (NIODeadline.now() - $0).nanoseconds / 1_000_000 } ?? 0
        let pending = (try? channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
        return Components.Schemas.Connection(address: channel.remoteAddress?.ipAddress, node: node, connectedAt: connectedAt, idleMs: max(0, idle),
                                             messagesIn: messagesIn, bytesIn: bytesIn, messagesOut: messagesOut &+ subscribed.messages,
                                             bytesOut: bytesOut &+ subscribed.bytes,
                                             pendingBytes: pending, userAgent: userAgent)
    }

    /// On the connection's loop: runs `body` with its handler now (nothing when it is gone).
    func onLoop(_ body: (ConnectionHandler) -> Void) {
        if let connectionHandler = handler.value { body(connectionHandler) }
    }

    /// Runs `body` with the connection's handler on its loop (nothing when it is gone).
    func withHandler(_ body: @escaping @Sendable (ConnectionHandler) -> Void) {
        channel.eventLoop.execute { [handler] in
            if let connectionHandler = handler.value { body(connectionHandler) }
        }
    }

    static func == (lhs: ConnectionRef, rhs: ConnectionRef) -> Bool { lhs.id == rhs.id }
    func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// (app id, user id): the key of a MESSAGE session. One session per key (SPEC C-6).
struct UserKey: Hashable, Sendable {
    let appId: String
    let userId: String
}

/// (app id, channel name): channels are per application.
struct ChannelKey: Hashable, Sendable {
    let appId: String
    let name: String
}

