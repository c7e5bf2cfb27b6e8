import Foundation
import Histogram
import NIOCore
import NIOPosix
import RTMAuth
import RTMClient

/// `rtm bench sdk`: one publisher and N subscribers that are all Swift SDK clients (`RTMClient`,
/// public API only), so the SDK's own send path (`publish`, its framing and masking, the
/// acknowledgement) and receive path (decoding, delivery to the delegate) are measured, not the
/// bench's lean client. Deliveries/s, publish → delegate latency, and what each subscriber saw:
/// lost (acknowledged, never delivered), duplicated, reordered (by the channel's sequence number).
public enum SDKRun {
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
        /// Subscribers.
        public var subscribers = 10
        /// Publishes per second; 0 = as fast as `window` allows.
        public var rate: Double = 0
        /// Publishes awaiting their acknowledgement at most (concurrent `publish` calls).
        public var window = 256
        /// Payload bytes (at least 16: send time and sequence number).
        public var size = 100
        /// Measured seconds, after `warmup` seconds.
        public var seconds: Double = 5
        /// Warm-up seconds, not measured.
        public var warmup: Double = 1
        /// Server process to sample (CPU) if known.
        public var serverPID: Int32?
        /// A line when connected.
        public var progress = true

        /// Defaults.
        public init() {}
    }

    /// The figures.
    public struct Result: Codable, Sendable {
        /// SDK subscribers.
        public var subscribers: Int
        /// Asked publish rate (0: max).
        public var rate: Double
        /// Payload bytes.
        public var size: Int
        /// Length of the measured interval.
        public var measuredSeconds: Double
        /// Acknowledged publishes per second over the measured interval.
        public var publishedPerSecond: Double
        /// Messages handed to the subscribers' delegates per second (sent in the interval).
        public var deliveriesPerSecond: Double
        /// Publish call → delegate.
        public var latency: LatencyFigures
        /// `publish` calls made (warm-up included).
        public var published: UInt64
        /// `publish` calls that threw, and the first error.
        public var publishErrors: UInt64
        public var firstError: String?
        /// Acknowledged publishes a subscriber never got (summed over subscribers).
        public var lost: UInt64
        /// Messages a subscriber got twice.
        public var duplicated: UInt64
        /// Messages that came after a higher channel sequence number.
        public var reordered: UInt64
        /// Cores used by this process and by the server (if its pid was given).
        public var clientCores: Double
        public var serverCores: Double?

        /// The human-readable table.
        public var text: String {
            let load = rate > 0 ? "rate=\(Int(rate)) msg/s" : "rate=max"
            var lines = ["sdk (RTMClient publish → RTMClient subscribers)  subs=\(subscribers) size=\(size)B \(load) measured=\(String(format: "%.2f", measuredSeconds))s"]
            lines.append("  published/s   \(Int(publishedPerSecond))")
            lines.append("  deliveries/s  \(Int(deliveriesPerSecond))")
            lines.append("  " + latency.text)
            lines.append("  lost=\(lost) duplicated=\(duplicated) reordered=\(reordered) published=\(published) errors=\(publishErrors)")
            if let firstError { lines.append("  first error: \(firstError)") }
            let server = serverCores.map { String(format: "%.2f", $0) } ?? "?"
            lines.append("  cpu cores     client=\(String(format: "%.2f", clientCores)) server=\(server)")
            return lines.joined(separator: "\n")
        }
    }

    static let channel = "bench-sdk"

    /// Runs the load; `log` gets progress lines. The clients run on the SDK's default event
    /// loops (`MultiThreadedEventLoopGroup.singleton`, one per core), as an application's would.
    public static func run(_ options: Options, log: @escaping @Sendable (String) -> Void) async throws -> Result {
        let clients = ClientList()
        do {
            let result = try await run(options, clients: clients, log: log)
            await clients.logoutAll()
            return result
        } catch {
            await clients.logoutAll()
            throw error
        }
    }

    /// The SDK clients of a run, to log out at its end.
    final class ClientList: @unchecked Sendable {
        private(set) var all: [RTMClient] = []
        func append(_ client: RTMClient) { all.append(client) }
        func logoutAll() async {
            await withTaskGroup(of: Void.self) { group in for client in all { group.addTask { await client.logout() } } }
        }
    }

    private static func run(_ options: Options, clients: ClientList, log: @escaping @Sendable (String) -> Void) async throws -> Result {
        let size = max(16, options.size)
        let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
        let stats = loops.map { SDKLoopStats(loop: $0) }
        func client(_ userId: String, loop: any EventLoop) async throws -> RTMClient {
            let client = try RTMClient(config: RTMClientConfig(appId: options.appId, userId: userId, endpoint: "ws://\(options.host):\(options.port)"),
                                       eventLoop: loop)
            clients.append(client)
            let token = options.certificate.map {
                AccessToken006.buildRTMToken(appId: options.appId, appCertificate: $0, userId: userId,
                                             privilegeExpireTimestamp: UInt32(Date().timeIntervalSince1970) + 3600)
            }
            try await client.login(token: token)
            return client
        }
        let runId = UInt32.random(in: 0...UInt32.max)
        var subscribers: [SDKSubscriber] = []
        for i in 0..<options.subscribers {
            let loopIndex = (i + 1) % loops.count
            let subscriber = SDKSubscriber(stats: stats[loopIndex])
            let sdk = try await client("bench-sdk-sub-\(runId)-\(i)", loop: loops[loopIndex])
            await sdk.setDelegate(subscriber)
            _ = try await sdk.subscribe(channel, options: SubscribeOptions(withPresence: false))
            subscribers.append(subscriber)
        }
        let publisher = try await client("bench-sdk-pub-\(runId)", loop: loops[0])
        if options.progress { log("connected \(options.subscribers) SDK subscribers and 1 SDK publisher") }

        let start = BenchClock.now() + 5_000_000
        let measureStart = start + UInt64(options.warmup * 1e9)
        let measureEnd = measureStart + UInt64(options.seconds * 1e9)
        for s in stats { try await s.loop.submit { s.measure = (measureStart, measureEnd) }.get() }
        let sampler = CPUSampler(serverPID: options.serverPID)
        try await LoadRun.sleep(until: start)
        var cpuStart = sampler.sample()

        // Publish: each call is one `RTMClient.publish` awaiting its acknowledgement, at most
        // `window` of them at a time; at a fixed rate, paced from the start.
        var published: UInt64 = 0, acked: UInt64 = 0, errors: UInt64 = 0, firstError: String?
        var ackedInWindow: UInt64 = 0
        var ackedSeqs = SeqSet()
        var measuring = false
        await withTaskGroup(of: (UInt64, UInt64, String?).self) { tasks in
            var inFlight = 0
            func collect(_ outcome: (UInt64, UInt64, String?)) {
                inFlight -= 1
                let (seq, sent, error) = outcome
                if let error {
                    errors += 1
                    if firstError == nil { firstError = error }
                } else {
                    acked += 1
                    ackedSeqs.insert(seq)
                    if sent >= measureStart && sent < measureEnd { ackedInWindow += 1 }
                }
            }
            while true {
                let now = BenchClock.now()
                if !measuring && now >= measureStart { measuring = true; cpuStart = sampler.sample() }
                guard now < measureEnd else { break }
                if inFlight >= options.window {
                    if let outcome = await tasks.next() { collect(outcome) }
                    continue
                }
                if options.rate > 0 {
                    let due = UInt64(Double(now - start) / 1e9 * options.rate) + 1
                    if published >= due {
                        let next = start + UInt64(Double(published) / options.rate * 1e9)
                        try? await LoadRun.sleep(until: min(next, measureEnd))
                        continue
                    }
                }
                published += 1
                let seq = published
                var payload = Data(count: size)
                payload.withUnsafeMutableBytes { bytes in
                    bytes.storeBytes(of: now.littleEndian, toByteOffset: 0, as: UInt64.self)
                    bytes.storeBytes(of: seq.littleEndian, toByteOffset: 8, as: UInt64.self)
                }
                inFlight += 1
                tasks.addTask {
                    do {
                        _ = try await publisher.publish(channel: channel, data: payload)
                        return (seq, now, nil)
                    } catch {
                        return (seq, now, "\(error)")
                    }
                }
            }
            while let outcome = await tasks.next() { collect(outcome) }
        }
        let cpuEnd = sampler.sample()

        // Stragglers: up to 3 s for every acknowledged publish to reach every subscriber.
        let deadline = BenchClock.now() + 3_000_000_000
        while BenchClock.now() < deadline {
            var done = true
            for s in subscribers {
                let count = try await s.stats.loop.submit { s.received }.get()
                if count < acked { done = false; break }
            }
            if done { break }
            try await Task.sleep(for: .milliseconds(20))
        }

        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        var deliveries: UInt64 = 0
        for s in stats {
            let (h, d) = try await s.loop.submit { (s.histogram, s.deliveries) }.get()
            histogram.add(h)
            deliveries += d
        }
        var lost: UInt64 = 0, duplicated: UInt64 = 0, reordered: UInt64 = 0
        let acknowledged = ackedSeqs
        for s in subscribers {
            let (missing, d, r) = try await s.stats.loop.submit { (s.seen.missing(from: acknowledged), s.duplicated, s.reordered) }.get()
            lost += missing
            duplicated += d
            reordered += r
        }
        let measured = Double(measureEnd - measureStart) / 1e9
        let cores = sampler.cores(from: cpuStart, to: cpuEnd)
        return Result(subscribers: options.subscribers, rate: options.rate, size: size, measuredSeconds: measured,
                      publishedPerSecond: Double(ackedInWindow) / measured, deliveriesPerSecond: Double(deliveries) / measured,
                      latency: LatencyFigures(histogram),
                      published: published, publishErrors: errors, firstError: firstError,
                      lost: lost, duplicated: duplicated, reordered: reordered,
                      clientCores: cores.client, serverCores: cores.server)
    }
}

/// The bench's sequence numbers a subscriber received (or the publisher had acknowledged): a
/// bit per number.
struct SeqSet: Sendable {
    private var words: [UInt64] = []

    /// Inserts `seq`; false if it was already there.
    @discardableResult
    mutating func insert(_ seq: UInt64) -> Bool {
        let word = Int(seq / 64)
        if word >= words.count { words.append(contentsOf: repeatElement(0, count: max(word + 1 - words.count, words.count))) }
        let bit = UInt64(1) << (seq % 64)
        defer { words[word] |= bit }
        return words[word] & bit == 0
    }

    /// How many numbers of `other` are not here.
    func missing(from other: SeqSet) -> UInt64 {
        var count: UInt64 = 0
        for (i, word) in other.words.enumerated() {
            let mine = i < words.count ? words[i] : 0
            count += UInt64((word & ~mine).nonzeroBitCount)
        }
        return count
    }
}

/// What the subscribers of one event loop measured. Confined to that loop (the SDK calls a
/// client's delegate on the client's event loop).
final class SDKLoopStats: @unchecked Sendable {
    let loop: any EventLoop
    var measure: (start: UInt64, end: UInt64) = (.max, .max)
    var deliveries: UInt64 = 0
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)   // µs

    init(loop: any EventLoop) { self.loop = loop }
}

/// One SDK subscriber's delegate: checks the channel's sequence numbers (order, duplicates) and
/// the bench's (loss), records latency. Confined to its client's event loop.
final class SDKSubscriber: RTMClientDelegate, @unchecked Sendable {
    let stats: SDKLoopStats
    var seen = SeqSet()
    var received: UInt64 = 0
    var duplicated: UInt64 = 0
    var reordered: UInt64 = 0
    private var lastChannelSeq: UInt64 = 0

    init(stats: SDKLoopStats) { self.stats = stats }

    func rtmClient(_ client: RTMClient, didReceiveMessageEvent event: MessageEvent) {
        let now = BenchClock.now()
        guard event.channelName == SDKRun.channel, let data = event.data, data.count >= 16 else { return }
        let (sent, seq) = data.withUnsafeBytes { bytes in
            (UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)), UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
        guard seen.insert(seq) else { duplicated += 1; return }
        received += 1
        if let channelSeq = event.seq {
            if channelSeq < lastChannelSeq { reordered += 1 } else { lastChannelSeq = channelSeq }
        }
        if sent >= stats.measure.start && sent < stats.measure.end {
            stats.deliveries += 1
            _ = stats.histogram.record(now > sent ? (now - sent) / 1000 : 0)
        }
    }
}
