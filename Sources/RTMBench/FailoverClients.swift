import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// One process's share of `rtm bench cluster-failover`: N lean clients logged in and subscribed
/// on the nodes of a cluster (client i on node i mod nodes), each knowing every node, as the SDK
/// does with several endpoints: when its connection dies it tries the next node
/// of its order (its home, then the others shuffled, as the SDK shuffles its endpoints) after
/// the SDK's jittered backoff (SPEC R-1: 2, 4, 8 … s capped at 64 s, each
/// × [0.5, 1]; admission control's "retry later" is honoured, T-9), logs in and subscribes
/// again. It reports when each client lost its link and when it was back, logged in and
/// subscribed (CLOCK_MONOTONIC, the same clock in every process of the machine).
public enum FailoverClients {
    /// How the clients are shaped.
    public struct Options: Sendable {
        public var nodes: [BenchEndpoint] = []
        public var clients = 15_000
        public var appId = ""
        public var certificate: String?
        public var threads = System.coreCount
        /// Local address to connect from (spreads ports when many processes connect).
        public var source: String?
        /// Distinguishes this process's user ids from the others'.
        public var tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        /// Channels the clients subscribe to (client i: channel i mod this).
        public var channels = 100
        /// The SDK's backoff (`RTMClientConfig.backoffInitial` / `backoffMax`).
        public var backoffInitial = 2.0
        public var backoffMax = 64.0
        /// Seconds an attempt (connect, upgrade, login, subscribe) may take before it is given
        /// up and the next endpoint tried (the SDK's login timeout, C-1).
        public var attemptTimeout = 12.0
        public init() {}
    }

    /// What happened to this process's clients.
    public struct Report: Codable, Sendable {
        /// Clients per node at the start, in `Options.nodes` order.
        public var perNode: [Int]
        /// For each client that lost its link: the node it was on, when it lost it, and when it
        /// was back (nil: not back, stuck).
        public var losses: [Loss]

        public struct Loss: Codable, Sendable {
            public var node: Int
            public var lostAt: UInt64
            public var backAt: UInt64?
            /// The node it came back on.
            public var backOn: Int?
        }
    }

    /// The running clients, until `report()`.
    public final class Fleet: Sendable {
        private let group: MultiThreadedEventLoopGroup
        private let clients: [FailoverClient]
        private let pings: [RepeatedTask]

        fileprivate init(group: MultiThreadedEventLoopGroup, clients: [FailoverClient], pings: [RepeatedTask]) {
            self.group = group
            self.clients = clients
            self.pings = pings
        }

        /// Clients that lost their link, and of them those back.
        public func counts() -> (lost: Int, back: Int) {
            var lost = 0, back = 0
            for client in clients {
                let (l, b) = client.state.withLockedValue { ($0.lostAt != nil, $0.backAt != nil) }
                if l { lost += 1 }
                if b { back += 1 }
            }
            return (lost, back)
        }

        /// The figures; closes every connection.
        public func report(nodes: Int) async -> Report {
            var perNode = Array(repeating: 0, count: nodes)
            var losses: [Report.Loss] = []
            for client in clients {
                perNode[client.home] += 1
                let state = client.state.withLockedValue { $0 }
                if let lostAt = state.lostAt {
                    losses.append(Report.Loss(node: state.lostOn ?? client.home, lostAt: lostAt, backAt: state.backAt, backOn: state.backOn))
                }
            }
            for task in pings { task.cancel() }
            for client in clients { client.loop.execute { client.close() } }
            try? await group.shutdownGracefully()
            return Report(perNode: perNode, losses: losses)
        }
    }

    /// Connects every client (logged in and subscribed) and returns them running.
    public static func start(_ options: Options, log: @escaping @Sendable (String) -> Void) async throws -> Fleet {
        guard !options.nodes.isEmpty else { throw BenchError("no nodes") }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, options.threads))
        let loops = (0..<max(1, options.threads)).map { _ in group.next() }
        let (lists, pings) = PeerList.heartbeats(on: loops)
        var clients: [FailoverClient] = []
        let start = BenchClock.now()
        do {
            for batchStart in stride(from: 0, to: options.clients, by: 200) {
                var readies: [EventLoopFuture<Void>] = []
                for i in batchStart..<min(options.clients, batchStart + 200) {
                    let client = FailoverClient(index: i, options: options, loop: loops[i % loops.count], list: lists[i % loops.count])
                    clients.append(client)
                    readies.append(client.loop.flatSubmit { client.connectFirst() })
                }
                for ready in readies { try await ready.get() }
                if batchStart % 5000 == 0 && batchStart > 0 { log("  \(batchStart) clients logged in and subscribed") }
            }
        } catch {
            for task in pings { task.cancel() }
            try? await group.shutdownGracefully()
            throw error
        }
        log("\(options.clients) clients logged in and subscribed in \(String(format: "%.1f", Double(BenchClock.now() - start) / 1e9)) s")
        return Fleet(group: group, clients: clients, pings: pings)
    }
}

/// One client with several endpoints. Its connection attempts run on `loop`; `state` is read
/// from other threads.
final class FailoverClient: @unchecked Sendable {
    struct State {
        var lostAt: UInt64?
        var lostOn: Int?
        var backAt: UInt64?
        var backOn: Int?
    }

    let state = NIOLockedValueBox(State())
    let loop: any EventLoop
    /// The node it starts on.
    let home: Int
    private let options: FailoverClients.Options
    private let userId: String
    private let channel: String
    private let list: PeerList
    /// The nodes in the order it tries them: its home, then the others shuffled (the SDK
    /// shuffles its endpoints: a dead node's clients spread over the survivors).
    private let order: [Int]
    private var position = 0
    private var node: Int { order[position] }
    private var attempts = 0
    /// Every link it opened (a socket's delegate is unowned: its peer must outlive it).
    private var links: [FailoverLink] = []
    private var current: FailoverLink?
    private var first: EventLoopPromise<Void>?
    /// The run is over: a closed link is not retried.
    private var stopping = false

    init(index: Int, options: FailoverClients.Options, loop: any EventLoop, list: PeerList) {
        self.options = options
        self.loop = loop
        self.list = list
        let home = index % options.nodes.count
        self.home = home
        self.order = [home] + (0..<options.nodes.count).filter { $0 != home }.shuffled()
        self.userId = "fo-\(options.tag)-\(index)"
        self.channel = "fo-\(index % max(1, options.channels))"
    }

    /// The first login and subscription (fails the run if it fails).
    func connectFirst() -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        first = promise
        attempt()
        return promise.futureResult
    }

    private func attempt() {
        let endpoint = options.nodes[node]
        let socket = BenchSocket(index: 0, host: endpoint.host, port: endpoint.port, path: "/v1", subprotocol: "rtm.v1")
        let link = FailoverLink(socket: socket, target: .rtm(appId: options.appId, certificate: options.certificate), userId: userId,
                                channel: channel, subscribe: true, userMessages: false, loop: loop)
        link.owner = self
        links.append(link)
        list.peers.append(link)
        BenchSocket.connect(socket, host: endpoint.host, port: endpoint.port, source: options.source, loop: loop).whenFailure { error in
            link.failed("connect: \(error)")
        }
        // T-1: an attempt that neither succeeds nor fails (a node that accepts nothing more) is
        // abandoned after the SDK's connect-and-login deadline.
        let deadline = loop.scheduleTask(in: .nanoseconds(Int64(options.attemptTimeout * 1e9))) {
            link.failed("no login within the attempt timeout")
        }
        link.ready.futureResult.whenComplete { [self] result in
            deadline.cancel()
            switch result {
            case .success: up(link)
            case .failure(let error):
                link.socket.close()
                if let first {
                    self.first = nil
                    first.fail(error)
                } else {
                    retry()
                }
            }
        }
    }

    private func up(_ link: FailoverLink) {
        current = link
        attempts = 0
        if let first {
            self.first = nil
            first.succeed(())
            return
        }
        let now = BenchClock.now()
        let node = self.node
        state.withLockedValue {
            if $0.backAt == nil {
                $0.backAt = now
                $0.backOn = node
            }
        }
    }

    /// The link that was up closed.
    fileprivate func lost(_ link: FailoverLink) {
        guard link === current, !stopping else { return }
        current = nil
        let now = BenchClock.now()
        let node = self.node
        state.withLockedValue {
            if $0.lostAt == nil {
                $0.lostAt = now
                $0.lostOn = node
            }
        }
        retry()
    }

    /// The next endpoint after the SDK's backoff (R-1).
    private func retry() {
        guard !stopping else { return }
        attempts += 1
        position = (position + 1) % order.count
        let base = min(options.backoffMax, options.backoffInitial * Double(1 << min(attempts - 1, 30)))
        let delay = base * Double.random(in: 0.5...1)
        loop.scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) { [self] in attempt() }
    }

    func close() {
        stopping = true
        let link = current
        current = nil
        link?.socket.close()
    }
}

/// A login-and-subscribe link that tells its client when it closes after being up.
final class FailoverLink: BenchPeer, @unchecked Sendable {
    weak var owner: FailoverClient?

    override func closed(_ socket: BenchSocket) {
        let wasUp = readyDone && !closedFlag
        super.closed(socket)
        if wasUp { owner?.lost(self) }
    }
}
