import Atomics
import Foundation
import Histogram
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RTMAuth
import RTMClient
import RTMProtocol

/// `rtm bench overload`: is the server fair when it falls behind? Flat-out raw publishers (each
/// on its own channel, at the server's default limits, reconnecting whenever the server closes
/// them) saturate it, next to clients that behave: publishers pacing below the publish limit,
/// and two Swift SDK clients (a subscriber that only pings, and a publisher sending 10/s to it).
/// The behaving clients must see no disconnection and no rate-limit refusal, and the healthy
/// publish → delivery latency stays low. The flood's own figures (refused, closed) are shown
/// too: a flood is expected to be refused and closed.
public enum OverloadRun {
    /// How the run is shaped.
    public struct Options: Sendable {
        /// Server host (ws://host:port).
        public var host = "127.0.0.1"
        /// Server port.
        public var port = 9600
        /// App id.
        public var appId = ""
        /// App certificate: tokens are minted per user when given.
        public var certificate: String?
        /// Flat-out publishers.
        public var floods = 200
        /// Publishers pacing at `pacedRate` (below the server's publish limit).
        public var paced = 10
        /// Messages per second of each paced publisher.
        public var pacedRate: Double = 50
        /// Messages per second of the healthy SDK publisher.
        public var healthyRate: Double = 10
        /// Measured seconds, after `warmup` seconds of flood.
        public var seconds: Double = 20
        /// Seconds of flood before the measurement.
        public var warmup: Double = 3
        /// Event loops of the raw publishers.
        public var threads = 1
        /// Server process to sample (CPU) if known.
        public var serverPID: Int32?
        /// Defaults.
        public init() {}
    }

    /// The figures.
    public struct Result: Codable, Sendable {
        /// The run's shape (as in `Options`).
        public var floods: Int
        public var paced: Int
        public var pacedRate: Double
        public var healthyRate: Double
        /// Length of the measured interval.
        public var measuredSeconds: Double
        /// Frames the flood wrote and what became of them.
        public var floodSent: UInt64
        public var floodAcknowledged: UInt64
        public var floodRateLimited: UInt64
        public var floodClosed: UInt64
        /// Close codes in the close frames the flood read, and its refused logins.
        public var floodCloseCodes: [String: UInt64]
        public var floodLoginsRefused: UInt64
        /// Paced publishers: sent, refused by the rate limit, other refusals, connections lost.
        public var pacedSent: UInt64
        public var pacedRateLimited: UInt64
        public var pacedOtherRefusals: UInt64
        public var pacedDisconnections: UInt64
        /// The healthy SDK clients.
        public var healthyPublished: UInt64
        public var healthyDelivered: UInt64
        public var healthyRateLimited: UInt64
        public var healthyOtherErrors: UInt64
        public var healthyFirstError: String?
        /// Link changes away from `connected` of the healthy subscriber and publisher.
        public var healthyDisconnections: Int
        /// Healthy publish → delivery at the SDK subscriber.
        public var healthyLatency: LatencyFigures
        /// Cores used by this process and by the server (if its pid was given).
        public var clientCores: Double
        public var serverCores: Double?

        /// The behaving clients saw nothing wrong.
        public var fair: Bool {
            healthyDisconnections == 0 && healthyRateLimited == 0 && healthyOtherErrors == 0 && pacedRateLimited == 0
                && pacedDisconnections == 0 && healthyDelivered == healthyPublished
        }

        /// The human-readable table.
        public var text: String {
            func f(_ v: Double) -> String { String(format: "%.0f", v) }
            let codes = floodCloseCodes.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")
            return """
            overload  flood=\(floods) flat-out publishers  paced=\(paced)×\(f(pacedRate))/s  healthy SDK publisher \(f(healthyRate))/s → SDK subscriber  measured=\(String(format: "%.1f", measuredSeconds))s
              flood         sent/s=\(f(Double(floodSent) / measuredSeconds)) acked/s=\(f(Double(floodAcknowledged) / measuredSeconds)) rate-limited/s=\(f(Double(floodRateLimited) / measuredSeconds)) closed=\(floodClosed)\(codes.isEmpty ? "" : " (\(codes))") logins refused=\(floodLoginsRefused)
              paced         sent=\(pacedSent) rate-limited=\(pacedRateLimited) other refusals=\(pacedOtherRefusals) disconnections=\(pacedDisconnections)
              healthy       published=\(healthyPublished) delivered=\(healthyDelivered) rate-limited=\(healthyRateLimited) other errors=\(healthyOtherErrors) disconnections=\(healthyDisconnections)
              healthy \(healthyLatency.text)
              cpu cores     client=\(String(format: "%.2f", clientCores)) server=\(serverCores.map { String(format: "%.2f", $0) } ?? "?")
              \(fair ? "fair: the behaving clients saw no disconnection, refusal or loss" : "UNFAIR: a behaving client was disconnected, refused or lost a message")\(healthyFirstError.map { "\n  first healthy error: \($0)" } ?? "")
            """
        }
    }

    static let healthyChannel = "overload-healthy"

    /// Watches the healthy SDK clients: link changes and deliveries (on the clients' loops).
    final class HealthyWatcher: RTMClientDelegate, @unchecked Sendable {
        let state = NIOLockedValueBox<(disconnections: Int, delivered: UInt64, histogram: Histogram<UInt64>, measure: (UInt64, UInt64))>(
            (0, 0, Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .three), (.max, .max)))
        func rtmClient(_ client: RTMClient, didReceiveLinkStateEvent event: LinkStateEvent) {
            if event.previousState == .connected && event.currentState != .connected && event.operation != .logout {
                state.withLockedValue { $0.disconnections += 1 }
                FileHandle.standardError.write(Data("healthy client: \(event)\n".utf8))
            }
        }
        func rtmClient(_ client: RTMClient, didReceiveMessageEvent event: MessageEvent) {
            let now = BenchClock.now()
            guard event.channelName == OverloadRun.healthyChannel, let data = event.data, data.count >= 8 else { return }
            let sent = data.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
            state.withLockedValue {
                guard sent >= $0.measure.0 && sent < $0.measure.1 else { return }
                $0.delivered += 1
                _ = $0.histogram.record(now > sent ? (now - sent) / 1000 : 0)
            }
        }
    }

    /// Runs the load; `log` gets progress lines.
    public static func run(_ options: Options, log: @escaping @Sendable (String) -> Void) async throws -> Result {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, options.threads))
        let watcher = HealthyWatcher()
        // The healthy SDK clients have a loop of their own, at normal priority.
        let healthyGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let runId = UInt32.random(in: 0...UInt32.max)
        func sdkClient(_ userId: String) async throws -> RTMClient {
            let client = try RTMClient(config: RTMClientConfig(appId: options.appId, userId: userId, endpoint: "ws://\(options.host):\(options.port)"),
                                       eventLoop: healthyGroup.next())
            await client.setDelegate(watcher)
            let token = options.certificate.map {
                AccessToken006.buildRTMToken(appId: options.appId, appCertificate: $0, userId: userId,
                                             privilegeExpireTimestamp: UInt32(Date().timeIntervalSince1970) + 3600)
            }
            try await client.login(token: token)
            return client
        }
        let subscriber = try await sdkClient("overload-sub-\(runId)")
        _ = try await subscriber.subscribe(healthyChannel)
        let publisher = try await sdkClient("overload-pub-\(runId)")

        // The flood's loops run at a lower priority (nice 10), so that on a small machine the
        // bench's own lateness does not pass for the server's; the paced publishers have a
        // loop of their own at normal priority.
        let loops = Array(group.makeIterator())
        for loop in loops { try await loop.submit { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10) }.get() }
        let pacedGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let pacedLoop = pacedGroup.next()
        var publishers: [OverloadPublisher] = []
        let counting = ManagedAtomic(false)
        let (host, port) = (options.host, options.port)
        for i in 0..<(options.floods + options.paced) {
            let flood = i < options.floods
            let loop = flood ? loops[i % loops.count] : pacedLoop
            let name = flood ? "overload-flood-\(runId)-\(i)" : "overload-paced-\(runId)-\(i)"
            publishers.append(OverloadPublisher(
                loop: loop, userId: name, channel: name, rate: flood ? nil : options.pacedRate, appId: options.appId, certificate: options.certificate, counting: counting,
                makeSocket: { BenchSocket(index: i, host: host, port: port, path: "/v1", subprotocol: "rtm.v1") },
                connect: { BenchSocket.connect($0, host: host, port: port, source: nil, loop: loop) }))
        }
        let start = BenchClock.now()
        var measureStart = start + UInt64(options.warmup * 1e9)
        var measureEnd = measureStart + UInt64(options.seconds * 1e9)
        // The behaving publishers are in first; then the flood comes.
        let pacedOnes = publishers.filter { $0.rate != nil }
        for p in pacedOnes { let end = measureEnd; p.loop.execute { p.start(until: end) } }
        let readyBy = BenchClock.now() + 10_000_000_000
        while BenchClock.now() < readyBy {
            var all = true
            for p in pacedOnes where !(try await p.loop.submit { p.started }.get()) { all = false }
            if all { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        measureStart = BenchClock.now() + UInt64(options.warmup * 1e9)
        measureEnd = measureStart + UInt64(options.seconds * 1e9)
        watcher.state.withLockedValue { $0.measure = (measureStart, measureEnd) }
        for p in publishers { let end = measureEnd; p.loop.execute { p.extend(until: end) } }
        for p in publishers where p.rate == nil { let end = measureEnd; p.loop.execute { p.start(until: end) } }
        log("\(options.paced) paced publishers logged in; \(options.floods) flat-out publishers started; warming up \(options.warmup) s")
        try await LoadRun.sleep(until: measureStart)
        counting.store(true, ordering: .relaxed)
        let sampler = CPUSampler(serverPID: options.serverPID)
        let cpuStart = sampler.sample()

        // The healthy publisher: one awaited SDK publish every 1/rate s, the send time in front.
        var published: UInt64 = 0, rateLimited: UInt64 = 0, otherErrors: UInt64 = 0, firstError: String?
        await withTaskGroup(of: String?.self) { tasks in
            var next = measureStart
            while next < measureEnd {
                try? await LoadRun.sleep(until: next)
                let now = BenchClock.now()
                var payload = Data(count: 16)
                payload.withUnsafeMutableBytes { $0.storeBytes(of: now.littleEndian, toByteOffset: 0, as: UInt64.self) }
                published += 1
                tasks.addTask {
                    do {
                        _ = try await publisher.publish(channel: healthyChannel, data: payload)
                        return nil
                    } catch {
                        return "\(error)"
                    }
                }
                next += UInt64(1e9 / max(0.1, options.healthyRate))
            }
            while let outcome = await tasks.next() {
                guard let error = outcome else { continue }
                if error.contains("\(RTMErrorCode.channelPublishMessageTooFrequent.rawValue)") { rateLimited += 1 } else { otherErrors += 1 }
                if firstError == nil { firstError = error }
            }
        }
        let cpuEnd = sampler.sample()
        // Late deliveries: up to 5 s for the last healthy messages.
        let deadline = BenchClock.now() + 5_000_000_000
        while BenchClock.now() < deadline, watcher.state.withLockedValue({ $0.delivered }) < published - rateLimited - otherErrors {
            try await Task.sleep(for: .milliseconds(20))
        }
        counting.store(false, ordering: .relaxed)
        var flood = OverloadPublisher.Counts(), paced = OverloadPublisher.Counts()
        for p in publishers {
            let counts = try await p.loop.submit { p.counts }.get()
            if p.rate == nil {
                flood.sent += counts.sent; flood.acknowledged += counts.acknowledged
                flood.rateLimited += counts.rateLimited; flood.closed += counts.closed; flood.loginsRefused += counts.loginsRefused
                for (code, n) in counts.closeCodes { flood.closeCodes[code, default: 0] += n }
            } else {
                paced.sent += counts.sent; paced.rateLimited += counts.rateLimited
                paced.otherRefusals += counts.otherRefusals; paced.closed += counts.closed
            }
        }
        await subscriber.logout()
        await publisher.logout()
        try await group.shutdownGracefully()
        try await pacedGroup.shutdownGracefully()
        try await healthyGroup.shutdownGracefully()
        let healthy = watcher.state.withLockedValue { $0 }
        let cores = sampler.cores(from: cpuStart, to: cpuEnd)
        return Result(
            floods: options.floods, paced: options.paced, pacedRate: options.pacedRate, healthyRate: options.healthyRate,
            measuredSeconds: Double(measureEnd - measureStart) / 1e9,
            floodSent: flood.sent, floodAcknowledged: flood.acknowledged, floodRateLimited: flood.rateLimited, floodClosed: flood.closed,
            floodCloseCodes: Dictionary(uniqueKeysWithValues: flood.closeCodes.map { (String($0.key), $0.value) }),
            floodLoginsRefused: flood.loginsRefused,
            pacedSent: paced.sent, pacedRateLimited: paced.rateLimited, pacedOtherRefusals: paced.otherRefusals, pacedDisconnections: paced.closed,
            healthyPublished: published, healthyDelivered: healthy.delivered, healthyRateLimited: rateLimited, healthyOtherErrors: otherErrors,
            healthyFirstError: firstError, healthyDisconnections: healthy.disconnections, healthyLatency: LatencyFigures(healthy.histogram),
            clientCores: cores.client, serverCores: cores.server)
    }
}
