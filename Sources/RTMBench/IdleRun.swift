import Foundation
import NIOCore
import NIOPosix

/// `rtm bench idle`: N logged-in clients, each sending the protocol ping every 5 s (the default
/// heartbeat), held for a while; the server's resident memory per connection and its CPU.
public enum IdleRun {
    /// The figures.
    public struct Result: Codable, Sendable {
        public var clients: Int
        public var connectSeconds: Double
        public var heldSeconds: Double
        public var serverRSSBeforeBytes: Int
        public var serverRSSAfterBytes: Int
        public var bytesPerConnection: Double
        public var serverCores: Double
        public var disconnected: Int
        /// The same clients against the idle floor (NIO WebSocket connections that only answer
        /// pings), measured the same way right after; nil: not run.
        public var floor: Floor?

        /// The idle floor's figures.
        public struct Floor: Codable, Sendable {
            public var bytesPerConnection: Double
            public var serverCores: Double
            public var disconnected: Int

            public init(bytesPerConnection: Double, serverCores: Double, disconnected: Int) {
                self.bytesPerConnection = bytesPerConnection; self.serverCores = serverCores; self.disconnected = disconnected
            }
        }

        public var text: String {
            var lines = [
                "idle  clients=\(clients) connected in \(String(format: "%.1f", connectSeconds)) s, held \(String(format: "%.0f", heldSeconds)) s",
                "  server RSS   before=\(serverRSSBeforeBytes / 1024) KiB  after=\(serverRSSAfterBytes / 1024) KiB",
                "  per connection  \(String(format: "%.2f", bytesPerConnection / 1024)) KiB",
                "  server CPU   \(String(format: "%.1f", serverCores * 100)) % of a core while idle",
                "  disconnected=\(disconnected)",
            ]
            if let floor {
                lines.append("  floor        \(String(format: "%.1f", floor.serverCores * 100)) % of a core, \(String(format: "%.2f", floor.bytesPerConnection / 1024)) KiB per connection (the same clients on NIO WebSocket connections that only answer pings; disconnected=\(floor.disconnected))")
                lines.append("  rtm/floor    CPU \(String(format: "%.2f", serverCores / max(floor.serverCores, 1e-6))) ×, memory per connection \(String(format: "%.2f", bytesPerConnection / max(floor.bytesPerConnection, 1))) ×")
            }
            return lines.joined(separator: "\n")
        }
    }

    public static func run(_ options: LoadOptions, clients: Int, hold: Double, log: @escaping @Sendable (String) -> Void) async throws -> Result {
        guard let pid = options.serverPID, let before = CPUSampler.rss(pid) else {
            throw BenchError("idle needs --server-pid of a running server on this machine (to read its memory)")
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, options.threads))
        let loops = (0..<max(1, options.threads)).map { _ in group.next() }
        var peers: [BenchPeer] = []
        // Heartbeats from the first connection on: a client waiting for the others must not time out.
        let (lists, pings) = PeerList.heartbeats(on: loops)
        let start = BenchClock.now()
        // User ids unique per run: several generator processes against one server must not
        // log in as each other (the second login of a user id kicks the first, SPEC C-6).
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        do {
            for batchStart in stride(from: 0, to: clients, by: 200) {
                var readies: [EventLoopFuture<Void>] = []
                for i in batchStart..<min(clients, batchStart + 200) {
                    let loop = loops[i % loops.count]
                    let socket = BenchSocket(index: i, host: options.host, port: options.port, path: options.path,
                                             subprotocol: options.target == .floor ? nil : "rtm.v1")
                    let list = lists[i % loops.count]
                    let peer = try await loop.submit {
                        let peer = BenchPeer(socket: socket, target: options.target, userId: "idle-\(tag)-\(i)", channel: "", subscribe: false, userMessages: false, loop: loop)
                        peer.pingsFloor = true
                        list.peers.append(peer)
                        return peer
                    }.get()
                    peers.append(peer)
                    readies.append(BenchSocket.connect(socket, host: options.host, port: options.port, source: nil, loop: loop)
                        .flatMap { peer.ready.futureResult })
                }
                for ready in readies { try await ready.get() }
                if batchStart % 5000 == 0 && batchStart > 0 { log("  \(batchStart) connected") }
            }
        } catch {
            for task in pings { task.cancel() }
            try? await group.shutdownGracefully()
            throw error
        }
        let connected = Double(BenchClock.now() - start) / 1e9
        log("connected \(clients) clients in \(String(format: "%.1f", connected)) s; holding \(Int(hold)) s")
        // Let the server settle, then measure CPU over the rest of the hold.
        try await Task.sleep(for: .seconds(min(3, hold / 3)))
        let sampler = CPUSampler(serverPID: pid)
        let a = sampler.sample()
        try await Task.sleep(for: .seconds(max(1, hold - min(3, hold / 3))))
        let b = sampler.sample()
        let after = CPUSampler.rss(pid) ?? 0
        for task in pings { task.cancel() }
        let disconnected = try await peers.asyncMap { p in try await p.loop.submit { p.closedFlag }.get() }.filter { $0 }.count
        for peer in peers { peer.loop.execute { peer.socket.close() } }
        try? await group.shutdownGracefully()
        return Result(clients: clients, connectSeconds: connected, heldSeconds: hold, serverRSSBeforeBytes: before,
                      serverRSSAfterBytes: after, bytesPerConnection: Double(after - before) / Double(max(1, clients)),
                      serverCores: sampler.cores(from: a, to: b).server ?? 0, disconnected: disconnected)
    }
}
