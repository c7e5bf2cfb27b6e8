import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import RTMAuth
import RTMClient

/// `rtm bench cluster-outage`: Swift SDK clients (public API only) publish and subscribe across
/// a cluster's nodes while the caller injects a database fault (a failover, a node cut off from
/// the database); the run reports how long publishes went unacknowledged and what each
/// subscriber was told it lost, against what it really missed.
///
/// Each publisher has its own channel and publishes one message after the other (each awaited:
/// the order of one publisher is the order of its acknowledgements) at a paced rate; every
/// client knows every node (the SDK's endpoint list), so a client sent away or cut off moves to
/// another node, resumes, and its SDK sends unacknowledged publishes again with their msgIds.
/// Subscribers of each channel record every message and `gap` notice.
public enum OutageRun {
    /// How the run is shaped.
    public struct Options: Sendable {
        /// Every node, `ws://host:port`.
        public var endpoints: [String] = []
        public var appId = ""
        /// App certificate: tokens are minted per user.
        public var certificate = ""
        /// Publishers, one channel each.
        public var publishers = 12
        /// Subscribers per channel.
        public var subscribersPerChannel = 2
        /// Publishes per second of each publisher.
        public var ratePerPublisher: Double = 20
        /// Seconds of steady load before the fault.
        public var before: Double = 3
        /// Seconds after the fault until every publisher must have been acknowledged again.
        public var deadline: Double = 60
        /// Seconds of steady load after the last publisher was acknowledged again.
        public var after: Double = 3
        /// Seconds after the load for every subscriber to get every acknowledged message of its
        /// channel; what has not arrived by then counts as not delivered.
        public var settle: Double = 10
        /// The SDK's request timeout (longer than any outage measured: a publish is sent again
        /// until acknowledged).
        public var requestTimeout: Double = 120

        public init() {}
    }

    /// The figures.
    public struct Result: Codable, Sendable {
        /// What the caller did (its own words).
        public var fault: String
        public var publishers: Int
        public var subscribers: Int
        /// Publishes acknowledged over the run.
        public var acknowledged: Int
        /// Publishes that failed to the application (the SDK's request timeout ran out).
        public var failed: Int
        /// Publishers whose acknowledgements paused for more than a second after the fault.
        public var paused: Int
        /// Seconds from the fault until each paused publisher was acknowledged again
        /// (median and longest); nil when none paused.
        public var ackedAgainP50: Double?
        public var ackedAgainMax: Double?
        /// Publishers not acknowledged again within the deadline.
        public var stuck: Int
        /// Subscribers whose link went down at least once.
        public var subscribersMoved: Int
        /// `gap` notices with a count, and the numbers they named (summed over subscribers).
        public var gapNotices: Int
        public var gapCounted: Int
        /// `gap` notices without a count (a new epoch: the database failed over).
        public var gapUnknown: Int
        /// Acknowledged messages a subscriber never got, where it was told of a loss (summed).
        public var lostAnnounced: Int
        /// Acknowledged messages a subscriber never got, without any notice (must be 0).
        public var lostSilently: Int
        /// Messages a subscriber got twice (must be 0).
        public var duplicated: Int
        /// Messages that came after a higher number of their channel's epoch (must be 0).
        public var reordered: Int

        /// Whether exactly-once held: nothing lost silently, duplicated or reordered, nobody stuck.
        public var isClean: Bool { lostSilently == 0 && duplicated == 0 && reordered == 0 && stuck == 0 }

        /// The human-readable table.
        public var text: String {
            func s(_ value: Double?) -> String { value.map { String(format: "%.2f s", $0) } ?? "-" }
            return """
                cluster-outage  \(fault)
                  publishers=\(publishers) (one channel each)  subscribers=\(subscribers)  acknowledged=\(acknowledged)  failed to the app=\(failed)
                  publishers paused by the fault  \(paused)   acknowledged again after  p50=\(s(ackedAgainP50))  max=\(s(ackedAgainMax))   stuck=\(stuck)
                  subscribers that lost their link  \(subscribersMoved)
                  told: gap notices with a count \(gapNotices) (\(gapCounted) messages), without a count (new epoch) \(gapUnknown)
                  acknowledged but not delivered: announced \(lostAnnounced), silently \(lostSilently)   duplicated=\(duplicated)  reordered=\(reordered)
                """
        }
    }

    /// Runs the load, calls `fault` after `before` seconds (it returns what it did), and reports.
    public static func run(_ options: Options, fault: @escaping @Sendable () async throws -> String,
                           log: @escaping @Sendable (String) -> Void) async throws -> Result {
        guard !options.endpoints.isEmpty, options.publishers >= 1 else { throw BenchError("no nodes or no publishers") }
        let runId = UInt32.random(in: 0...UInt32.max)
        var clients: [RTMClient] = []
        func client(_ userId: String) async throws -> RTMClient {
            var config = RTMClientConfig(appId: options.appId, userId: userId, endpoint: options.endpoints[0])
            config.endpoints = options.endpoints
            config.requestTimeout = options.requestTimeout
            let client = try RTMClient(config: config)
            clients.append(client)
            let token = AccessToken006.buildRTMToken(appId: options.appId, appCertificate: options.certificate, userId: userId,
                                                     privilegeExpireTimestamp: UInt32(Date().timeIntervalSince1970) + 3600)
            try await client.login(token: token)
            return client
        }
        do {
            let result = try await run(options, client: client, runId: runId, fault: fault, log: log)
            for client in clients { await client.logout() }
            return result
        } catch {
            for client in clients { await client.logout() }
            throw error
        }
    }

    private static func run(_ options: Options, client: (String) async throws -> RTMClient, runId: UInt32,
                            fault: @escaping @Sendable () async throws -> String,
                            log: @escaping @Sendable (String) -> Void) async throws -> Result {
        var subscribers: [Subscriber] = []
        for channel in 0..<options.publishers {
            for k in 0..<options.subscribersPerChannel {
                let sdk = try await client("outage-sub-\(runId)-\(channel)-\(k)")
                let subscriber = Subscriber(channel: Self.channel(channel))
                subscriber.follow(sdk.events())
                _ = try await sdk.subscribe(Self.channel(channel), options: SubscribeOptions(withPresence: false))
                subscribers.append(subscriber)
            }
        }
        var publishers: [Publisher] = []
        for i in 0..<options.publishers {
            publishers.append(Publisher(client: try await client("outage-pub-\(runId)-\(i)"), channel: Self.channel(i), index: i))
        }
        log("\(publishers.count) SDK publishers and \(subscribers.count) SDK subscribers over \(options.endpoints.count) nodes")

        let interval = 1 / max(0.1, options.ratePerPublisher)
        let all = publishers
        let running = Task {
            await withTaskGroup(of: Void.self) { group in
                for publisher in all { group.addTask { await publisher.run(interval: interval) } }
            }
        }
        try await Task.sleep(nanoseconds: UInt64(options.before * 1e9))
        let faultAt = BenchClock.now()
        let what = try await fault()
        log("fault: \(what)")
        // Until every publisher was acknowledged again after a pause (or the deadline), then
        // `after` more seconds of steady load.
        let deadline = faultAt + UInt64(options.deadline * 1e9)
        while BenchClock.now() < deadline {
            try await Task.sleep(nanoseconds: 250_000_000)
            let now = BenchClock.now()
            if now > faultAt + 2_000_000_000 && publishers.allSatisfy({ $0.ledger.withLockedValue { $0.acknowledgedRecently(now: now) } }) { break }
        }
        try await Task.sleep(nanoseconds: UInt64(options.after * 1e9))
        for publisher in publishers { publisher.stop() }
        let stoppedAt = BenchClock.now()
        await running.value
        // The last acknowledgements' deliveries: a node that reconnects to the database late
        // catches up late, which is not a loss (until `settle` has passed).
        let acknowledged = Dictionary(uniqueKeysWithValues: publishers.map { publisher in
            (publisher.channel, Set(publisher.ledger.withLockedValue { $0.acks.map(\.text) }))
        })
        let settleEnd = BenchClock.now() + UInt64(options.settle * 1e9)
        while BenchClock.now() < settleEnd, !subscribers.allSatisfy({ $0.hasAll(acknowledged[$0.channel] ?? []) }) {
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        return report(what, publishers: publishers, subscribers: subscribers, acknowledged: acknowledged, faultAt: faultAt,
                      stoppedAt: stoppedAt)
    }

    static func channel(_ index: Int) -> String { "outage-\(index)" }

    /// `acknowledged`: each channel's acknowledged texts.
    private static func report(_ fault: String, publishers: [Publisher], subscribers: [Subscriber], acknowledged: [String: Set<String>],
                               faultAt: UInt64, stoppedAt: UInt64) -> Result {
        var result = Result(fault: fault, publishers: publishers.count, subscribers: subscribers.count, acknowledged: 0, failed: 0, paused: 0,
                            stuck: 0, subscribersMoved: 0, gapNotices: 0, gapCounted: 0, gapUnknown: 0, lostAnnounced: 0, lostSilently: 0,
                            duplicated: 0, reordered: 0)
        var ackedAgain: [Double] = []
        for publisher in publishers {
            let ledger = publisher.ledger.withLockedValue { $0 }
            result.acknowledged += ledger.acks.count
            result.failed += ledger.failed
            // The first acknowledgement after the longest pause that the fault caused.
            let times = [faultAt] + ledger.acks.map(\.at).filter { $0 > faultAt }
            var pause: (length: UInt64, end: UInt64?) = (0, nil)
            for (earlier, later) in zip(times, times.dropFirst()) where later - earlier > pause.length { pause = (later - earlier, later) }
            // Never acknowledged after the fault, or no longer at the end: stuck.
            guard let last = ledger.acks.last?.at, last > faultAt, stoppedAt < last + 2_000_000_000 else {
                result.stuck += 1
                continue
            }
            if pause.length > 1_000_000_000, let end = pause.end {
                result.paused += 1
                ackedAgain.append(Double(end - faultAt) / 1e9)
            }
        }
        ackedAgain.sort()
        result.ackedAgainP50 = ackedAgain.isEmpty ? nil : ackedAgain[ackedAgain.count / 2]
        result.ackedAgainMax = ackedAgain.last
        for subscriber in subscribers {
            let seen = subscriber.seen.withLockedValue { $0 }
            if seen.linkLost { result.subscribersMoved += 1 }
            var texts: [String: Int] = [:]
            var told = false
            var last: UInt64 = 0
            for item in seen.items {
                switch item {
                case .message(let text, let seq):
                    texts[text, default: 0] += 1
                    if seq <= last { result.reordered += 1 }
                    last = seq
                case .gap(let count):
                    told = true
                    if let count {
                        result.gapNotices += 1
                        result.gapCounted += count
                        last += UInt64(count)
                    } else {
                        result.gapUnknown += 1
                        last = 0   // a new epoch numbers from 1
                    }
                }
            }
            result.duplicated += texts.values.reduce(0) { $0 + max(0, $1 - 1) }
            let missing = (acknowledged[subscriber.channel] ?? []).subtracting(texts.keys).count
            if told { result.lostAnnounced += missing } else { result.lostSilently += missing }
        }
        return result
    }

    /// One publisher: one message after the other, each awaited, at a paced interval.
    final class Publisher: Sendable {
        struct Ledger {
            var acks: [(text: String, at: UInt64)] = []
            var failed = 0
            /// Acknowledged within the last second. Compared without subtracting from `now`: an
            /// acknowledgement stamped after it (the publisher's task appended it between the
            /// caller's reading of the clock and this read of the ledger) is recent.
            func acknowledgedRecently(now: UInt64) -> Bool { acks.last.map { now < $0.at + 1_000_000_000 } ?? false }
        }

        let client: RTMClient
        let channel: String
        let index: Int
        let ledger = NIOLockedValueBox(Ledger())
        private let running = NIOLockedValueBox(true)

        init(client: RTMClient, channel: String, index: Int) {
            self.client = client
            self.channel = channel
            self.index = index
        }

        func stop() { running.withLockedValue { $0 = false } }

        func run(interval: Double) async {
            var n = 0
            var next = BenchClock.now()
            while running.withLockedValue({ $0 }) {
                n += 1
                let text = "p\(index)-\(n)"
                do {
                    _ = try await client.publish(channel: channel, message: text)
                    let at = BenchClock.now()
                    ledger.withLockedValue { $0.acks.append((text, at)) }
                } catch {
                    ledger.withLockedValue { $0.failed += 1 }
                }
                next += UInt64(interval * 1e9)
                let now = BenchClock.now()
                if next > now { try? await Task.sleep(nanoseconds: next - now) } else { next = now }
            }
        }
    }

    /// One subscriber of one channel: what it was given, in order.
    final class Subscriber: Sendable {
        enum Item {
            case message(String, UInt64)
            case gap(Int?)
        }

        struct Seen {
            var items: [Item] = []
            var linkLost = false
        }

        let channel: String
        let seen = NIOLockedValueBox(Seen())

        init(channel: String) { self.channel = channel }

        /// Whether it has been given every one of `texts`.
        func hasAll(_ texts: Set<String>) -> Bool {
            var missing = texts
            seen.withLockedValue { seen in
                for case .message(let text, _) in seen.items { missing.remove(text) }
            }
            return missing.isEmpty
        }

        func follow(_ events: AsyncStream<RTMEvent>) {
            let channel = self.channel, seen = self.seen
            Task {
                for await event in events {
                    switch event {
                    case .message(let message) where message.channelName == channel:
                        seen.withLockedValue { $0.items.append(.message(message.text ?? "", message.seq ?? 0)) }
                    case .gap(let gap) where gap.channelName == channel:
                        seen.withLockedValue { $0.items.append(.gap(gap.lostCount)) }
                    case .linkState(let change) where change.currentState != .connected:
                        seen.withLockedValue { $0.linkLost = true }
                    default:
                        break
                    }
                }
            }
        }
    }
}
