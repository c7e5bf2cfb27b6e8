import Foundation
import Histogram
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Runs one load: connects every subscriber and publisher, publishes for warm-up + measured
/// seconds, waits for the stragglers, and reports (`rtm bench fanout`, `rtm bench pairs`).
public enum LoadRun {
    /// Runs the load; `log` gets the live lines (one per second).
    public static func run(_ options: LoadOptions, log: @escaping @Sendable (String) -> Void) async throws -> LoadResult {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, options.threads))
        do {
            let result = try await run(options, group: group, log: log)
            try? await group.shutdownGracefully()
            return result
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func run(_ options: LoadOptions, group: MultiThreadedEventLoopGroup, log: @escaping @Sendable (String) -> Void) async throws -> LoadResult {
        let loops = (0..<max(1, options.threads)).map { _ in group.next() }
        let stats = loops.map { _ in LoopStats() }
        let total = options.groups * options.subscribersPerGroup
        let setupStart = BenchClock.now()
        let subscriberSubprotocol: String? = if case .rtm = options.target { "rtm.v1" } else { nil }

        // Subscribers first, 200 connections at a time.
        var subscribers: [BenchSubscriber] = []
        var peersByLoop: [[BenchPeer]] = loops.map { _ in [] }
        // Keep rtm connections alive from the first one on: a protocol ping every 5 s from each.
        let (lists, pingTasks) = PeerList.heartbeats(on: loops)
        defer { for task in pingTasks { task.cancel() } }
        for batchStart in stride(from: 0, to: total, by: 200) {
            var readies: [EventLoopFuture<Void>] = []
            for i in batchStart..<min(total, batchStart + 200) {
                let groupIndex = i / options.subscribersPerGroup
                let loopIndex = (groupIndex + 1 + i) % loops.count
                let loop = loops[loopIndex]
                let node = options.subscriberEndpoint(group: groupIndex, index: i % options.subscribersPerGroup)
                let socket = BenchSocket(index: i, host: node.host, port: node.port, path: options.path, subprotocol: subscriberSubprotocol,
                                         unmasked: options.unmaskedShortcut)
                let list = lists[loopIndex]
                let subscriber = try await loop.submit {
                    let subscriber = BenchSubscriber(socket: socket, target: options.target, userId: "bench-sub-\(i)",
                                                     channel: "bench-\(groupIndex)", userMessages: options.userMessages, loop: loop,
                                                     stats: stats[loopIndex], payloadSize: options.payloadSize)
                    list.peers.append(subscriber)
                    return subscriber
                }.get()
                subscribers.append(subscriber)
                peersByLoop[loopIndex].append(subscriber)
                let source = total > 20_000 ? "127.0.0.\(1 + i / 20_000)" : nil
                readies.append(BenchSocket.connect(socket, host: node.host, port: node.port, source: source, loop: loop)
                    .flatMap { subscriber.ready.futureResult })
            }
            for ready in readies { try await ready.get() }
        }
        // Publishers.
        var publishers: [BenchPublisher] = []
        for g in 0..<options.groups {
            let loop = loops[g % loops.count]
            let node = options.publisherEndpoint(group: g)
            let socket = BenchSocket(index: total + g, host: node.host, port: node.port, path: options.path, subprotocol: subscriberSubprotocol,
                                     unmasked: options.unmaskedShortcut)
            let list = lists[g % loops.count]
            let publisher = try await loop.submit {
                let publisher = BenchPublisher(socket: socket, target: options.target, userId: "bench-pub-\(g)", channel: "bench-\(g)",
                                               receiver: options.userMessages ? "bench-sub-\(g * options.subscribersPerGroup)" : nil,
                                               loop: loop, size: options.size,
                                               window: options.window ?? options.automaticWindow, msgIds: options.msgIds, json: options.jsonPublish,
                                               pumpInterval: .microseconds(Int64(200 * max(1, options.groups / 16))),
                                               stats: stats[g % loops.count])
                list.peers.append(publisher)
                return publisher
            }.get()
            let mine = Array(subscribers[(g * options.subscribersPerGroup)..<((g + 1) * options.subscribersPerGroup)])
            try await loop.submit { publisher.subscribers = mine }.get()
            publishers.append(publisher)
            peersByLoop[g % loops.count].append(publisher)
            try await BenchSocket.connect(socket, host: node.host, port: node.port, source: nil, loop: loop).get()
            try await publisher.ready.futureResult.get()
        }
        let setupSeconds = Double(BenchClock.now() - setupStart) / 1e9
        if options.progress { log("connected \(total) subscribers and \(options.groups) publishers in \(String(format: "%.1f", setupSeconds)) s") }


        // Publish: warm-up, then the measured interval.
        let start = BenchClock.now() + 5_000_000
        let measureStart = start + UInt64(options.warmup * 1e9)
        let measureEnd = measureStart + UInt64(options.seconds * 1e9)
        for (loop, peers) in zip(loops, peersByLoop) {
            let mine = peers.compactMap { $0 as? BenchSubscriber }
            let publishing = peers.compactMap { $0 as? BenchPublisher }
            try await loop.submit {
                for s in mine { s.measure = (measureStart, measureEnd) }
                for p in publishing { p.measure = (measureStart, measureEnd) }
            }.get()
        }
        let sampler = CPUSampler(serverPID: options.serverPID)
        if options.rate > 0 {
            // Fixed rate: one schedule per loop, publisher g at phase g/N of the period.
            let perPublisher = options.rate / Double(options.groups)
            for (index, loop) in loops.enumerated() {
                let mine = publishers.enumerated().filter { $0.offset % loops.count == index }
                    .map { (publisher: $0.element, phase: Double($0.offset) / Double(options.groups)) }
                let schedule = PacedSchedule(loop: loop, publishers: mine, rate: perPublisher, start: start, end: measureEnd)
                loop.execute { schedule.begin() }
            }
        } else {
            for publisher in publishers {
                publisher.loop.execute { publisher.start(at: start, until: measureEnd) }
            }
        }
        try await sleep(until: measureStart)
        let cpuStart = sampler.sample()
        var second = 0
        while BenchClock.now() + 1_000_000_000 <= measureEnd + 10_000_000 {
            try await sleep(until: measureStart + UInt64(second + 1) * 1_000_000_000)
            second += 1
            if options.progress {
                var merged = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
                var mergedAcks = merged
                var count: UInt64 = 0
                for (loop, s) in zip(loops, stats) {
                    let (h, a, n) = try await loop.submit { () -> (Histogram<UInt64>, Histogram<UInt64>, UInt64) in
                        defer { s.second.reset(); s.secondAcked.reset(); s.secondDeliveries = 0 }
                        return (s.second, s.secondAcked, s.secondDeliveries)
                    }.get()
                    merged.add(h)
                    mergedAcks.add(a)
                    count += n
                }
                var line = String(format: "  %3ds  deliveries/s %10d  p99 %8.1f ms", second, count, Double(merged.valueAtPercentile(99)) / 1000)
                if mergedAcks.totalCount > 0 { line += String(format: "  acked p99 %8.1f ms", Double(mergedAcks.valueAtPercentile(99)) / 1000) }
                log(line)
            }
        }
        try await sleep(until: measureEnd)
        let cpuEnd = sampler.sample()
        for publisher in publishers { try await publisher.done.futureResult.get() }

        // Stragglers: up to `stragglerSeconds` (3 s) for everything published to arrive everywhere.
        let publishedCounts = try await publishers.asyncMap { p in try await p.loop.submit { p.published }.get() }
        let drainDeadline = BenchClock.now() + UInt64(max(options.stragglerSeconds, 0) * 1e9)
        func undelivered() -> UInt64 {
            var missing: UInt64 = 0
            for (g, count) in publishedCounts.enumerated() {
                for s in subscribers[(g * options.subscribersPerGroup)..<((g + 1) * options.subscribersPerGroup)] {
                    let seen = s.progress.load(ordering: .relaxed)
                    missing += count > seen ? count - seen : 0
                }
            }
            return missing
        }
        while undelivered() > 0 && BenchClock.now() < drainDeadline { try await Task.sleep(for: .milliseconds(20)) }

        // Gather.
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        var acked = histogram
        var deliveries: UInt64 = 0, lost: UInt64 = 0, outOfOrder: UInt64 = 0, duplicated: UInt64 = 0
        for (loop, s) in zip(loops, stats) {
            let (h, a, d, l, o, dup) = try await loop.submit { (s.histogram, s.acked, s.deliveries, s.lost, s.outOfOrder, s.duplicated) }.get()
            histogram.add(h)
            acked.add(a)
            deliveries += d
            lost += l
            outOfOrder += o
            duplicated += dup
        }
        let disconnected = try await subscribers.asyncMap { s in try await s.loop.submit { s.closedFlag }.get() }.filter { $0 }.count
        let errors = try await publishers.asyncMap { p in try await p.loop.submit { (p.errors, p.firstError) }.get() }
        if let first = errors.compactMap(\.1).first { log("server error: \(first)") }
        let errorCount = errors.map(\.0).reduce(0, +)
        let published = publishedCounts.reduce(0, +)
        let measured = Double(measureEnd - measureStart) / 1e9
        let cores = sampler.cores(from: cpuStart, to: cpuEnd)
        let publishedInWindow = Double(published) * options.seconds / (options.seconds + options.warmup)
        let latency = LatencyFigures(histogram)
        let result = LoadResult(
            target: "\(options.target == .floor ? "floor" : "rtm") \(Self.targetURLs(options))\(options.userMessages ? " user messages" : "")",
            publishes: options.userMessages ? "binary sendUser" : options.jsonPublish ? "json" : "binary", shortcuts: options.shortcuts,
            groups: options.groups, subscribersPerGroup: options.subscribersPerGroup, size: options.payloadSize, rate: options.rate,
            measuredSeconds: measured, publishedPerSecond: publishedInWindow / measured,
            deliveriesPerSecond: Double(deliveries) / measured,
            p50Micros: latency.p50Micros, p99Micros: latency.p99Micros, p999Micros: latency.p999Micros, maxMicros: latency.maxMicros,
            // A refused publish is never acknowledged, so acks and sends no longer line up.
            acked: acked.totalCount > 0 && errorCount == 0 ? LatencyFigures(acked) : nil,
            lost: lost, outOfOrder: outOfOrder, duplicated: duplicated, undelivered: undelivered(), disconnected: disconnected,
            published: published, errors: errorCount,
            clientCores: cores.client, serverCores: cores.server, machineCores: cores.machine)
        for peer in subscribers { peer.loop.execute { peer.socket.close() } }
        for peer in publishers { peer.loop.execute { peer.socket.close() } }
        return result
    }

    /// `ws://host:port/path`, or for a cluster run its nodes and the subscribers' placement.
    private static func targetURLs(_ options: LoadOptions) -> String {
        guard options.nodes.count > 1 else { return "ws://\(options.host):\(options.port)\(options.path)" }
        let ports = options.nodes.map { String($0.port) }.joined(separator: ",")
        return "cluster of \(options.nodes.count) nodes (ports \(ports)), subscribers \(options.placement == .remote ? "on other nodes than their publisher" : "spread over every node")"
    }

    static func sleep(until deadline: UInt64) async throws {
        let now = BenchClock.now()
        if deadline > now { try await Task.sleep(for: .nanoseconds(Int64(deadline - now))) }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        out.reserveCapacity(count)
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
