import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import RTMTestSupport
@testable import RTMServer

/// A hub on one `EmbeddedEventLoop`, with the default single-node seams in memory (user
/// messages, storage and invitations kept in memory; any token accepted for app "app"): the
/// server of `EmbeddedConnection`s, with no listener and no socket.
final class EmbeddedServer {
    let loop = EmbeddedEventLoop()
    let hub: Hub

    init(configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        var configuration = ServerConfiguration()
        configuration.apps = ["app": nil]
        configure(&configuration)
        hub = Hub(configuration: configuration, loops: [loop], store: try SQLiteUserMessageStore(path: nil),
                  serviceStore: try SQLiteServiceStore(path: nil, fullSync: false), logger: Logger(label: "embedded"))
    }

    /// A new connection, just upgraded to WebSocket.
    func connect() throws -> EmbeddedConnection {
        try EmbeddedConnection(hub: hub, loop: loop)
    }
}

/// A server connection on an `EmbeddedChannel`: the `ConnectionHandler` with the handlers the
/// WebSocket upgrade puts before it (`ServerUpgrader`), on a hub built in memory with no
/// listener and no socket (`EmbeddedServer`). The test writes client frames in, reads
/// back what the connection wrote as WebSocket frames, and runs the loop's queued work when it
/// says: no thread, no timing.
final class EmbeddedConnection {
    let channel: EmbeddedChannel
    let handler: ConnectionHandler
    /// The socket's send side: `stall()` makes it a peer that stopped reading.
    let socket = SocketSide()
    private let loop: EmbeddedEventLoop
    private let hub: Hub

    /// A connection just upgraded to WebSocket, before its first frame.
    init(hub: Hub, loop: EmbeddedEventLoop) throws {
        self.loop = loop
        self.hub = hub
        channel = EmbeddedChannel(loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40_000)).wait()
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(socket)
        try sync.addHandler(RawOutboundHandler(), name: RTMServer.rawHandlerName)
        handler = ConnectionHandler(hub: hub, loop: loop)
        try sync.addHandler(handler)
        try sync.addHandler(WebSocketFrameEncoder(), position: .before(handler))
        try sync.addHandler(ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: 1 << 16)), position: .before(handler))
        handler.upgraded(context: try sync.context(handler: handler))
    }

    /// Sends a JSON request as a masked text frame, as a client does.
    func send(_ json: String) throws {
        try channel.writeInbound(RawPeer.text(json))
        settle()
    }

    /// Sends raw client bytes (one or more masked frames).
    func send(bytes: ByteBuffer) throws {
        try channel.writeInbound(bytes)
        settle()
    }

    /// Waits until the work the hub handed to its dispatch queues has ended (the storage queue,
    /// the user-message store's thread; a few rounds, since one may hand work to the other). That
    /// work answers this connection from its own thread, and an `EmbeddedEventLoop` and its
    /// channel are not thread-safe: it must land while this thread leaves them alone. (The lock
    /// queue runs on Swift's cooperative pool, which a blocked test thread could starve: not
    /// waited for.)
    private func settle() {
        for _ in 0..<3 {
            hub.storage.waitForQueue()
            hub.mailbox.store.thread.waitForCalls()
        }
    }

    /// Runs the loop's queued work, then takes every frame the connection wrote since the last call.
    func received() throws -> [RawPeer.WireFrame] {
        settle()
        loop.run()
        var bytes = ByteBuffer()
        while var part = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
        for var part in socket.takeHeld() { bytes.writeBuffer(&part) }
        return RawPeer.frames(in: bytes)
    }

    /// The text frames written since the last call, as JSON objects (binary frames left out).
    func receivedJSON() throws -> [[String: Any]] {
        try received().filter { $0.opcode == 0x1 }.map { frame in
            guard let object = try JSONSerialization.jsonObject(with: Data(frame.payload)) as? [String: Any] else {
                throw EmbeddedConnectionError("not a JSON object: \(frame.text)")
            }
            return object
        }
    }
}

/// The first handler of the pipeline, where bytes leave for the socket. Normally it passes
/// them on; stalled, it keeps them and never completes their writes, as a socket whose peer
/// stopped reading (the kernel's buffers full): whatever waits for a write to finish waits.
final class SocketSide: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    private var stalled = false
    private var held: [ByteBuffer] = []

    /// From now on writes are held, never completed.
    func stall() { stalled = true }

    /// The bytes held since the last call (each counted as sent by the test, not completed).
    func takeHeld() -> [ByteBuffer] {
        defer { held = [] }
        return held
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard stalled else { return context.write(data, promise: promise) }
        held.append(unwrapOutboundIn(data))   // the promise is never completed: the peer reads nothing
    }
}

struct EmbeddedConnectionError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
