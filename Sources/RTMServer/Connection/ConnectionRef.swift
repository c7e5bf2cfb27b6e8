import NIOCore
import NIOWebSocket

/// A handle on one client connection that any thread may hold: its id, its NIO channel
/// (thread-safe for writes and close) and the index of the event loop it lives on.
final class ConnectionRef: Sendable, Hashable {
    let id: UInt64
    let channel: any Channel
    let loopIndex: Int
    /// The connection's handler, set by it on its loop and read only there: where pre-encoded
    /// frames go (`writeEncoded`).
    private let handler: NIOLoopBoundBox<WeakConnectionHandler?>

    init(id: UInt64, channel: any Channel, loopIndex: Int) {
        self.id = id
        self.channel = channel
        self.loopIndex = loopIndex
        self.handler = .makeEmptyBox(valueType: WeakConnectionHandler.self, eventLoop: channel.eventLoop)
    }

    /// On the connection's loop: its handler takes pre-encoded frames from now on.
    func attach(_ handler: ConnectionHandler) {
        self.handler.value = WeakConnectionHandler(handler: handler)
    }

    /// On the connection's loop: writes `frame`, a whole WebSocket frame already encoded (header
    /// and body in one buffer), below the frame encoder, without flushing; dropped once the
    /// connection sends its close frame (nothing may follow it). Without a handler (not attached,
    /// or gone), `fallback` is written through the pipeline instead.
    func writeEncoded(_ frame: ByteBuffer, fallback: @autoclosure () -> WebSocketFrame) {
        if let handler = handler.value?.handler {
            handler.writeEncoded(frame, fallback: fallback)
        } else {
            channel.write(fallback(), promise: nil)
        }
    }

    /// Runs `body` with the connection's handler on its loop (nothing when it is gone).
    func withHandler(_ body: @escaping @Sendable (ConnectionHandler) -> Void) {
        channel.eventLoop.execute { [handler] in
            if let connectionHandler = handler.value?.handler { body(connectionHandler) }
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

/// A connection's handler, not kept alive by the `ConnectionRef` it owns.
struct WeakConnectionHandler {
    weak var handler: ConnectionHandler?
}
