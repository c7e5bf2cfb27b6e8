import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RTMAuth
import RTMClient

/// `rtm bench soak`: churn held for a long time, to see whether the server keeps its memory,
/// descriptors and threads flat. Each of `concurrency` workers repeats a cycle: an SDK client
/// connects and logs in, subscribes to its channel, publishes and waits for its own message,
/// logs out; then a raw client logs in, subscribes and is cut (TCP reset, no close frame), so
/// the server also goes through a lost session, its presence grace and its timeout. Every
/// `reportEvery` seconds a line: server RSS, open descriptors and threads (from /proc, with a
/// server PID), cycles, errors, login and publish→delivery latency. At the end, a verdict on
/// memory growth from the slope of RSS over the second half of the run.
public enum SoakRun {
    /// How the soak is shaped.
    public struct Options: Sendable {
        /// Server URL (`ws://host:port/path`) and the app to log in to.
        public var url = "ws://127.0.0.1:9600/v1"
        public var appId = ""
        public var certificate: String?
        /// How long to churn, seconds.
        public var duration: Double = 60
        /// Workers running cycles at the same time.
        public var concurrency = 8
        /// Seconds between two report lines.
        public var reportEvery: Double = 10
        /// The server process, to read its memory, descriptors and threads (same machine).
        public var serverPID: Int32?
        /// Growth of RSS over the second half above which the verdict is "growing": this many
        /// bytes, and at least `growthFraction` of the RSS at mid-run.
        public var growthBytes = 4 * 1024 * 1024
        public var growthFraction = 0.05

        /// Default options.
        public init() {}
    }

    /// One report line.
    public struct Sample: Codable, Sendable {
        public var seconds: Double
        public var rssBytes: Int?
        public var descriptors: Int?
        public var threads: Int?
        /// Cycles and errors since the start.
        public var cycles: Int
        public var errors: Int
        /// Latencies over the interval since the previous sample.
        public var loginP50Ms: Double
        public var loginP99Ms: Double
        public var deliveryP50Ms: Double
        public var deliveryP99Ms: Double

        /// The line printed while the soak runs.
        public var text: String {
            func kib(_ bytes: Int?) -> String { bytes.map { "\($0 / 1024) KiB" } ?? "-" }
            return String(format: "%6.0f s  rss=%@  fds=%@  threads=%@  cycles=%d  errors=%d  login p50/p99=%.1f/%.1f ms  delivery p50/p99=%.1f/%.1f ms",
                          seconds, kib(rssBytes), descriptors.map(String.init) ?? "-", threads.map(String.init) ?? "-", cycles, errors,
                          loginP50Ms, loginP99Ms, deliveryP50Ms, deliveryP99Ms)
        }
    }

    /// The figures.
    public struct Result: Codable, Sendable {
        public var seconds: Double
        public var concurrency: Int
        public var cycles: Int
        public var errors: Int
        public var samples: [Sample]
        /// Least-squares slope of RSS over the second half, bytes per minute (nil: not measured).
        public var rssSlopeBytesPerMinute: Double?
        /// That slope divided by the cycle rate: what each cycle (two connections) left behind.
        public var bytesPerCycle: Double?
        /// Whether memory grew past the thresholds over the second half (nil: not judged).
        public var growing: Bool?
        public var verdict: String
        public var firstErrors: [String]

        /// The summary printed at the end.
        public var text: String {
            var lines = ["soak  \(Int(seconds)) s, \(concurrency) workers, \(cycles) cycles (\(String(format: "%.1f", Double(cycles) / max(seconds, 0.001)))/s), errors=\(errors)"]
            if let first = samples.first, let last = samples.last, let a = first.rssBytes, let b = last.rssBytes {
                lines.append("  server RSS \(a / 1024) → \(b / 1024) KiB, fds \(first.descriptors ?? 0) → \(last.descriptors ?? 0), threads \(first.threads ?? 0) → \(last.threads ?? 0)")
            }
            if let slope = rssSlopeBytesPerMinute {
                lines.append(String(format: "  RSS slope over the second half: %.0f KiB/min", slope / 1024)
                             + (bytesPerCycle.map { String(format: " (≈ %.0f bytes per cycle)", $0) } ?? ""))
            }
            lines.append("  verdict: \(verdict)")
            lines += firstErrors.map { "  error: \($0)" }
            return lines.joined(separator: "\n")
        }
    }

    /// Latencies and counters shared by the workers.
    private struct Tally {
        var cycles = 0
        var errors = 0
        var firstErrors: [String] = []
        var logins: [Double] = []
        var deliveries: [Double] = []
    }

    /// Runs the soak; `log` gets a line every `reportEvery` seconds.
    public static func run(_ options: Options, log: @escaping @Sendable (String) -> Void) async throws -> Result {
        var load = LoadOptions()
        try load.setURL(options.url)
        if load.path == "/" { load.path = "/v1" }
        let endpoint = "ws://\(load.host):\(load.port)\(load.path)"
        let (host, port, path) = (load.host, load.port, load.path)
        let target = BenchTarget.rtm(appId: options.appId, certificate: options.certificate)
        let tally = NIOLockedValueBox(Tally())
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let start = BenchClock.now()
        let end = start + UInt64(options.duration * 1e9)
        var samples: [Sample] = []

        func sample() -> Sample {
            let interval = tally.withLockedValue { t -> Tally in
                let copy = t
                t.logins.removeAll(keepingCapacity: true)
                t.deliveries.removeAll(keepingCapacity: true)
                return copy
            }
            let server = options.serverPID.map(ProcessFigures.init(pid:))
            return Sample(seconds: Double(BenchClock.now() - start) / 1e9, rssBytes: server?.rss, descriptors: server?.descriptors,
                          threads: server?.threads, cycles: interval.cycles, errors: interval.errors,
                          loginP50Ms: percentile(interval.logins, 0.5), loginP99Ms: percentile(interval.logins, 0.99),
                          deliveryP50Ms: percentile(interval.deliveries, 0.5), deliveryP99Ms: percentile(interval.deliveries, 0.99))
        }

        let first = sample()
        samples.append(first)
        log(first.text)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<max(1, options.concurrency) {
                group.addTask {
                    var cycle = 0
                    while BenchClock.now() < end && !Task.isCancelled {
                        let user = "soak-\(tag)-\(worker)"
                        do {
                            let (login, delivery) = try await sdkCycle(endpoint: endpoint, options: options, userId: user,
                                                                       text: "\(user)-\(cycle)")
                            try await cutCycle(host: host, port: port, path: path, target: target, userId: user + "-cut")
                            tally.withLockedValue {
                                $0.cycles += 1
                                $0.logins.append(login)
                                $0.deliveries.append(delivery)
                            }
                        } catch {
                            tally.withLockedValue {
                                $0.errors += 1
                                if $0.firstErrors.count < 5 { $0.firstErrors.append("\(user) cycle \(cycle): \(error)") }
                            }
                            try? await Task.sleep(for: .milliseconds(100))   // a failing server is not hammered
                        }
                        cycle += 1
                    }
                }
            }
            while true {
                let left = Double(end - min(end, BenchClock.now())) / 1e9
                guard left > options.reportEvery else { break }
                try await Task.sleep(for: .seconds(options.reportEvery))
                let current = sample()
                samples.append(current)
                log(current.text)
            }
            try await group.waitForAll()
        }
        // The last line once every worker has finished its cycle, so its counts are the totals.
        let last = sample()
        samples.append(last)
        log(last.text)
        let seconds = Double(BenchClock.now() - start) / 1e9
        let totals = tally.withLockedValue { $0 }
        return judge(options, seconds: seconds, samples: samples, cycles: totals.cycles, errors: totals.errors, firstErrors: totals.firstErrors)
    }

    /// The verdict on memory: the slope of RSS over the second half of the run (after start-up
    /// and warm-up allocations), and whether the growth it implies passes the thresholds.
    static func judge(_ options: Options, seconds: Double, samples: [Sample], cycles: Int, errors: Int, firstErrors: [String]) -> Result {
        var result = Result(seconds: seconds, concurrency: options.concurrency, cycles: cycles, errors: errors, samples: samples,
                            verdict: "", firstErrors: firstErrors)
        let points = samples.filter { $0.seconds >= seconds / 2 }.compactMap { s in s.rssBytes.map { (s.seconds, Double($0)) } }
        guard options.serverPID != nil else {
            result.verdict = "not judged: no --server-pid, the server's memory was not read"
            return result
        }
        guard points.count >= 3, let mid = points.first?.1 else {
            result.verdict = "not judged: too short (fewer than 3 samples in the second half; raise --duration or lower --report-every)"
            return result
        }
        let slope = leastSquaresSlope(points)   // bytes per second
        let half = samples.filter { $0.seconds >= seconds / 2 }
        let halfCycles = half.last!.cycles - half.first!.cycles
        let span = points.last!.0 - points.first!.0
        let growth = slope * span
        result.rssSlopeBytesPerMinute = slope * 60
        result.bytesPerCycle = halfCycles > 0 ? growth / Double(halfCycles) : nil
        let grew = growth > Double(options.growthBytes) && growth > options.growthFraction * mid
        result.growing = grew
        result.verdict = grew
            ? String(format: "GROWING: RSS rose %.1f MiB over the second half (%.0f s)", growth / 1_048_576, span)
            : String(format: "flat: RSS moved %.1f MiB over the second half (%.0f s), under the %.0f MiB / %.0f %% threshold",
                     growth / 1_048_576, span, Double(options.growthBytes) / 1_048_576, options.growthFraction * 100)
        return result
    }

    static func leastSquaresSlope(_ points: [(Double, Double)]) -> Double {
        let n = Double(points.count)
        let meanX = points.reduce(0) { $0 + $1.0 } / n
        let meanY = points.reduce(0) { $0 + $1.1 } / n
        let sxy = points.reduce(0) { $0 + ($1.0 - meanX) * ($1.1 - meanY) }
        let sxx = points.reduce(0) { $0 + ($1.0 - meanX) * ($1.0 - meanX) }
        return sxx == 0 ? 0 : sxy / sxx
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    /// An SDK client's life: login, subscribe, publish and wait for its own message, logout.
    /// Returns the login and the publish→delivery latencies, milliseconds.
    static func sdkCycle(endpoint: String, options: Options, userId: String, text: String) async throws -> (Double, Double) {
        let client = try RTMClient(config: RTMClientConfig(appId: options.appId, userId: userId, endpoint: endpoint))
        let events = client.events()
        do {
            let token = options.certificate.map {
                AccessToken006.buildRTMToken(appId: options.appId, appCertificate: $0, userId: userId,
                                             privilegeExpireTimestamp: UInt32(Date().timeIntervalSince1970) + 3600)
            }
            let loginStart = BenchClock.now()
            try await client.login(token: token)
            let login = Double(BenchClock.now() - loginStart) / 1e6
            try await client.subscribe(userId, options: SubscribeOptions(withPresence: false))
            let published = BenchClock.now()
            let delivered = try await withThrowingTaskGroup(of: UInt64?.self) { group in
                group.addTask {
                    for await event in events {
                        if case .message(let message) = event, message.text == text { return BenchClock.now() }
                    }
                    return nil
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(10))
                    return nil
                }
                try await client.publish(channel: userId, message: text)
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
            guard let at = delivered else { throw BenchError("own message not delivered within 10 s") }
            await client.logout()
            return (login, Double(at - published) / 1e6)
        } catch {
            await client.logout()
            throw error
        }
    }

    /// A raw client logs in and subscribes, then its connection is reset (SO_LINGER 0): the
    /// server sees the link die without a close frame and keeps the session for its grace.
    static func cutCycle(host: String, port: Int, path: String, target: BenchTarget, userId: String) async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let socket = BenchSocket(index: 0, host: host, port: port, path: path, subprotocol: "rtm.v1")
        let peer = BenchPeer(socket: socket, target: target, userId: userId, channel: userId, subscribe: true, userMessages: false, loop: loop)
        try await BenchSocket.connect(socket, host: host, port: port, source: nil, loop: loop).flatMap { peer.ready.futureResult }.get()
        try await loop.flatSubmit {
            guard let channel = socket.channel else { return loop.makeSucceededVoidFuture() }
            guard let options = channel as? any SocketOptionProvider else { return channel.close() }
            return options.setSoLinger(linger(l_onoff: 1, l_linger: 0)).flatMap { channel.close() }
        }.get()
    }
}

/// A process's resident memory, open descriptors and threads, from /proc (Linux).
struct ProcessFigures {
    var rss: Int?
    var descriptors: Int?
    var threads: Int?

    init(pid: Int32) {
        rss = CPUSampler.rss(pid)
        descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
        if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }) {
            threads = line.split(separator: "\t").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
    }
}
