import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import RTMTestSupport
@testable import RTMServer

/// A hub on one `NIOAsyncTestingEventLoop`, with the default single-node seams in memory (user
/// messages, storage and invitations kept in memory; any token accepted for app "app"): the
/// server of `EmbeddedConnection`s, with no listener and no socket.
///
/// The loop is a serial queue that is thread-safe: the hub's storage queue and the
/// user-message store's thread answer a connection from their own threads, and their answers
/// reach it through the loop's `execute`, one at a time, as on a real event loop. Its time
/// moves only when a test moves it, so no timer fires on its own.
final class EmbeddedServer {
    let loop = NIOAsyncTestingEventLoop()
    let hub: Hub

    init(configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        var configuration = ServerConfiguration()
        configuration.apps = ["app": nil]
        configure(&configuration)
        hub = Hub(configuration: configuration, loops: [loop], store: try SQLiteUserMessageStore(path: nil),
                  serviceStore: try SQLiteServiceStore(path: nil, fullSync: false), logger: Logger(label: "embedded"))
    }

    /// A new connection, just upgraded to WebSocket.
    func connect() async throws -> EmbeddedConnection {
        try await EmbeddedConnection(hub: hub, loop: loop)
    }
}

/// A server connection on a `NIOAsyncTestingChannel`: the `ConnectionHandler` with the handlers
/// the WebSocket upgrade puts before it (`ServerUpgrader`), on a hub built in memory with no
/// listener and no socket (`EmbeddedServer`). The test writes client frames in and reads back
/// what the connection wrote as WebSocket frames; everything that touches the channel or its
/// handlers runs on the loop's queue, never on the test's thread.
final class EmbeddedConnection {
    let channel: NIOAsyncTestingChannel
    private let handler: NIOLoopBound<ConnectionHandler>
    /// The socket's send side: `stall()` makes it a peer that stopped reading.
    private let socket: NIOLoopBound<SocketSide>
    private let loop: NIOAsyncTestingEventLoop
    private let hub: Hub

    /// How many times `settle()` lets the hub's queues and the loop run in turn: a request's
    /// longest chain of hops (loop → storage queue → loop → store thread → loop) is two rounds.
    private static let settleRounds = 4

    /// A connection just upgraded to WebSocket, before its first frame.
    init(hub: Hub, loop: NIOAsyncTestingEventLoop) async throws {
        self.loop = loop
        self.hub = hub
        let channel = NIOAsyncTestingChannel(loop: loop)
        self.channel = channel
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40_000)).get()
        (handler, socket) = try await loop.submit {
            let sync = channel.pipeline.syncOperations
            let socket = SocketSide()
            try sync.addHandler(socket)
            try sync.addHandler(RawOutboundHandler(), name: RTMServer.rawHandlerName)
            let handler = ConnectionHandler(hub: hub, loop: loop)
            try sync.addHandler(handler)
            try sync.addHandler(WebSocketFrameEncoder(), position: .before(handler))
            try sync.addHandler(ByteToMessageHandler(ServerFrameDecoder(maxFrameSize: 1 << 16)), position: .before(handler))
            handler.upgraded(context: try sync.context(handler: handler))
            return (NIOLoopBound(handler, eventLoop: loop), NIOLoopBound(socket, eventLoop: loop))
        }.get()
    }

    /// Sends a JSON request as a masked text frame, as a client does.
    func send(_ json: String) async throws {
        try await channel.writeInbound(RawPeer.text(json))
        await settle()
    }

    /// Sends raw client bytes (one or more masked frames).
    func send(bytes: ByteBuffer) async throws {
        try await channel.writeInbound(bytes)
        await settle()
    }

    /// From now on the socket holds what the connection writes and never completes it, as a
    /// socket whose peer stopped reading.
    func stall() async throws {
        try await loop.executeInContext { [socket] in socket.value.stall() }
    }

    /// Reads the connection handler's state on the loop.
    func inspect<Value: Sendable>(_ read: @escaping @Sendable (ConnectionHandler) -> Value) async throws -> Value {
        try await loop.executeInContext { [handler] in read(handler.value) }
    }

    /// Closes the channel, as the link's loss does.
    func close() async throws {
        try await channel.close().get()
        await settle()
    }

    /// Waits until the work the request handed to the hub's queues has answered: the storage
    /// queue, the user-message store's thread, then the loop, where their answers land (through
    /// its `execute`), in turn, for a few rounds, since one may hand work to the next. Each
    /// wait is a block queued behind the work (all three are serial queues), not a sleep. (The
    /// lock queue runs on Swift's cooperative pool: its answers are waited for as events.)
    private func settle() async {
        for _ in 0..<Self.settleRounds {
            await hub.storage.drain()
            let thread = hub.mailbox.store.thread
            await withCheckedContinuation { (ended: CheckedContinuation<Void, Never>) in thread.run { ended.resume() } }
            await loop.run()
        }
    }

    /// Lets the queued work answer, then takes every frame the connection wrote since the last call.
    func received() async throws -> [RawPeer.WireFrame] {
        await settle()
        var bytes = ByteBuffer()
        while var part = try await channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
        for var part in try await loop.executeInContext({ [socket] in socket.value.takeHeld() }) { bytes.writeBuffer(&part) }
        return RawPeer.frames(in: bytes)
    }

    /// The text frames written since the last call, as JSON objects (binary frames left out).
    func receivedJSON() async throws -> [[String: Any]] {
        try await received().filter { $0.opcode == 0x1 }.map { frame in
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

@available(*, unavailable) extension SocketSide: Sendable {}

struct EmbeddedConnectionError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
