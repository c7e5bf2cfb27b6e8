import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP proxy for fault-injection tests: it listens on `127.0.0.1:0` and forwards every
/// connection to a target port, and the test decides what happens to the bytes.
///
/// - `.pass`: bytes flow both ways.
/// - `.blackhole`: bytes are swallowed both ways, sockets stay open: a half-open link that TCP
///   does not report (SPEC H-5).
/// - `.delay(d)`: bytes flow, each chunk `d` late, in order.
/// - `.blackholeDownstream`: requests reach the server, its replies are swallowed.
/// - `cutAll()`: every open connection is reset (RST) on both sides.
/// - `setRefuseNew(true)`: new connections are accepted and reset at once, as a dead server.
/// - `retarget(to:)`: new connections go to another port (a virtual address moved to another
///   server, as in a database failover).
///
/// ```swift
/// let proxy = try await FaultProxy.start(targetPort: server.port)
/// proxy.setMode(.blackhole)
/// ```
public final class FaultProxy: Sendable {
    /// What happens to bytes in flight.
    public enum Mode: Sendable, Equatable {
        /// Forward.
        case pass
        /// Swallow, keep the sockets open.
        case blackhole
        /// Forward after a delay.
        case delay(TimeAmount)
        /// Forward client → server only; swallow what the server sends (its replies are lost).
        case blackholeDownstream
    }

    private struct State {
        var mode: Mode = .pass
        var refuseNew = false
        var accepted = 0
        var targetPort: Int
        var pairs: [ObjectIdentifier: (any Channel, (any Channel)?, Cut)] = [:]
    }

    private let state: NIOLockedValueBox<State>
    private let serverChannel: any Channel
    private let group: any EventLoopGroup
    /// The port the proxy listens on.
    public let port: Int
    /// The port new connections are forwarded to.
    public var targetPort: Int { state.withLockedValue { $0.targetPort } }

    private init(serverChannel: any Channel, group: any EventLoopGroup, targetPort: Int) {
        self.serverChannel = serverChannel
        self.group = group
        self.port = serverChannel.localAddress?.port ?? 0
        self.state = NIOLockedValueBox(State(targetPort: targetPort))
    }

    /// Forwards new connections to `port` from now on (open ones stay where they are).
    public func retarget(to port: Int) { state.withLockedValue { $0.targetPort = port } }

    /// Starts a proxy to `127.0.0.1:targetPort`.
    public static func start(targetPort: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> FaultProxy {
        let box = NIOLockedValueBox<FaultProxy?>(nil)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                guard let proxy = box.withLockedValue({ $0 }) else { return inbound.close() }
                return inbound.eventLoop.makeCompletedFuture { proxy.accept(inbound) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let proxy = FaultProxy(serverChannel: channel, group: group, targetPort: targetPort)
        box.withLockedValue { $0 = proxy }
        return proxy
    }

    /// The current mode.
    public var mode: Mode { state.withLockedValue { $0.mode } }

    /// Changes what happens to bytes from now on (open connections included).
    public func setMode(_ mode: Mode) { state.withLockedValue { $0.mode = mode } }

    /// While true, new connections are reset as soon as they are accepted.
    public func setRefuseNew(_ refuse: Bool) { state.withLockedValue { $0.refuseNew = refuse } }

    /// Connections accepted so far (refused ones included).
    public var acceptedConnections: Int { state.withLockedValue { $0.accepted } }

    /// Connections open now.
    public var openConnections: Int { state.withLockedValue { $0.pairs.count } }

    /// Resets every open connection, both sides (RST, no FIN).
    /// Nothing is relayed on any of them once this returns (the resets themselves complete on
    /// the sockets' event loops a moment later).
    public func cutAll() {
        let pairs = state.withLockedValue { state in defer { state.pairs = [:] }; return Array(state.pairs.values) }
        for (inbound, outbound, cut) in pairs {
            cut.withLockedValue { $0 = true }
            Self.reset(inbound)
            if let outbound { Self.reset(outbound) }
        }
    }

    /// Stops listening and resets every connection.
    public func stop() async throws {
        cutAll()
        try await serverChannel.close()
    }

    // MARK: internals

    private func accept(_ inbound: any Channel) {
        let (refuse, targetPort) = state.withLockedValue { state -> (Bool, Int) in
            state.accepted += 1
            return (state.refuseNew, state.targetPort)
        }
        if refuse {
            Self.reset(inbound)
            return
        }
        let key = ObjectIdentifier(inbound)
        let cut = Cut(false)
        state.withLockedValue { $0.pairs[key] = (inbound, nil, cut) }
        inbound.closeFuture.whenComplete { [self] _ in
            // A black hole does not pass a close on either: the other side stays half-open.
            let outbound = state.withLockedValue { state -> (any Channel)? in
                guard state.mode != .blackhole else { return nil }
                return state.pairs.removeValue(forKey: key)?.1
            }
            outbound?.close(promise: nil)
        }
        ClientBootstrap(group: inbound.eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { outbound in
                outbound.eventLoop.makeCompletedFuture {
                    try outbound.pipeline.syncOperations.addHandler(Relay(proxy: self, peer: inbound, toServer: false, cut: cut))
                }
            }
            .connect(host: "127.0.0.1", port: targetPort)
            .whenComplete { [self] result in
                switch result {
                case .failure:
                    Self.reset(inbound)
                case .success(let outbound):
                    let stillOpen = state.withLockedValue { state -> Bool in
                        guard state.pairs[key] != nil else { return false }
                        state.pairs[key] = (inbound, outbound, cut)
                        return true
                    }
                    guard stillOpen else { Self.reset(outbound); return }
                    outbound.closeFuture.whenComplete { [self] _ in
                        if mode != .blackhole { inbound.close(promise: nil) }
                    }
                    inbound.eventLoop.execute {
                        do {
                            try inbound.pipeline.syncOperations.addHandler(Relay(proxy: self, peer: outbound, toServer: true, cut: cut))
                            inbound.read()
                        } catch {
                            Self.reset(inbound)
                        }
                    }
                }
            }
    }

    /// Closes with SO_LINGER 0, so the peer gets a RST.
    static func reset(_ channel: any Channel) {
        guard let provider = channel as? any SocketOptionProvider else { channel.close(promise: nil); return }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Set when a pair is cut: its relays drop what they read from then on, so nothing passes
    /// after `cutAll()` returns, before the resets reach the sockets.
    typealias Cut = NIOLockedValueBox<Bool>

    /// Forwards (or not) the bytes read on one side to the other.
    private final class Relay: ChannelDuplexHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let proxy: FaultProxy
        private let peer: any Channel
        /// True on the client's side: the bytes read here go to the server.
        private let toServer: Bool
        private let cut: Cut
        /// Delayed chunks waiting for their time, in order.
        private var pending: [(due: NIODeadline, data: ByteBuffer)] = []
        private var drainScheduled = false

        init(proxy: FaultProxy, peer: any Channel, toServer: Bool, cut: Cut) {
            self.proxy = proxy
            self.cut = cut
            self.peer = peer
            self.toServer = toServer
        }

        func channelActive(context: ChannelHandlerContext) {
            context.read()
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            guard !cut.withLockedValue({ $0 }) else { return }
            switch proxy.mode {
            case .pass where pending.isEmpty:
                peer.writeAndFlush(bytes, promise: nil)
            case .pass:
                pending.append((.now(), bytes))
                drain(context: context)
            case .blackhole:
                break
            case .blackholeDownstream where toServer && pending.isEmpty:
                peer.writeAndFlush(bytes, promise: nil)
            case .blackholeDownstream:
                break
            case .delay(let amount):
                pending.append((.now() + amount, bytes))
                drain(context: context)
            }
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            context.read()   // autoRead is off for the accepted side; keep reading
            context.fireChannelReadComplete()
        }

        func channelInactive(context: ChannelHandlerContext) {
            if proxy.mode != .blackhole { peer.close(promise: nil) }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }

        private func drain(context: ChannelHandlerContext) {
            let now = NIODeadline.now()
            while let first = pending.first, first.due <= now {
                pending.removeFirst()
                guard !cut.withLockedValue({ $0 }) else { pending.removeAll(); return }
                peer.writeAndFlush(first.data, promise: nil)
            }
            guard let next = pending.first, !drainScheduled else { return }
            drainScheduled = true
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let contextBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(deadline: next.due) {
                loopBound.value.drainScheduled = false
                loopBound.value.drain(context: contextBound.value)
            }
        }
    }
}
