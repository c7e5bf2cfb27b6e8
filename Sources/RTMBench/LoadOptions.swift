import Foundation
import NIOCore

/// How a load run is shaped (`rtm bench fanout` / `rtm bench pairs`).
public struct LoadOptions: Sendable {
    /// Server host and port; path of the WebSocket endpoint.
    public var host = "127.0.0.1"
    public var port = 9600
    public var path = "/v1"
    /// What the server speaks.
    public var target: BenchTarget = .rtm(appId: "", certificate: nil)
    /// Publisher groups: each has one publisher and `subscribersPerGroup` subscribers on its own
    /// channel. fanout = 1 group of N; pairs = N groups of 1.
    public var groups = 1
    public var subscribersPerGroup = 100
    /// Messages per second over all publishers; 0 = as fast as the window allows.
    public var rate: Double = 0
    /// Payload bytes (≥ 16: send time and sequence number come first).
    public var size = 100
    /// Measured seconds, after `warmup` seconds.
    public var seconds: Double = 5
    public var warmup: Double = 1
    /// The longest the run waits, after the last publish, for stragglers to reach every
    /// subscriber (it ends as soon as they have); what has not arrived by then counts as
    /// undelivered.
    public var stragglerSeconds: Double = 3
    /// Client event loops.
    public var threads = System.coreCount
    /// Max mode: messages a publisher may have in flight (published, not yet at every
    /// subscriber); nil = `automaticWindow`.
    public var window: Int?

    /// The default window: 4096 messages per publisher, fewer when that would put more than
    /// 65,536 messages or about 4 M deliveries in flight over all publishers (many pairs, or
    /// 10,000 subscribers), which would only measure a queue seconds long.
    /// User messages (each stored durably, so thousands a second rather than millions): at most
    /// 64 per publisher, well under the 200 the server keeps per receiver, and about 8,192 over
    /// all publishers (at least 16 each).
    public var automaticWindow: Int {
        let publishers = max(1, groups)
        let window = max(16, min(4096, 65_536 / publishers, 4_096_000 / max(1, publishers * subscribersPerGroup)))
        return userMessages ? max(16, min(window, 64, 8192 / publishers)) : window
    }
    /// Server process to sample (CPU) if known.
    public var serverPID: Int32?
    /// A line per second while running.
    public var progress = true
    /// Send a client message id with each publish (as the SDK does).
    public var msgIds = true
    /// Pairs: user-to-user messages (`sendUser`, stored, acknowledged by the receiver) instead
    /// of channel messages.
    public var userMessages = false
    /// Publish JSON `publish` requests (text payloads, one per frame, masked: what browsers and
    /// other-language clients send) instead of binary publishes. Subscribers read whatever the
    /// server delivers.
    public var jsonPublish = false
    /// Shortcut, never for published figures: frames masked with the zero key (which leaves the
    /// payload as is and saves the server its unmasking). Real clients mask with a random key per
    /// frame (RFC 6455 §5.3), which is the default.
    public var unmaskedShortcut = false

    /// The payload size every publish has: at least 16 bytes (send time and sequence number),
    /// 32 for text payloads (`UserMessageText`: the same as 16 letters each).
    public var payloadSize: Int { max(userMessages || jsonPublish ? UserMessageText.minimumSize : 16, size) }

    /// The shortcuts this run takes (what real clients do not do), named in every figure it
    /// prints; empty for an honest run.
    public var shortcuts: [String] {
        var taken: [String] = []
        if unmaskedShortcut { taken.append("unmasked-shortcut (zero masking key)") }
        if !msgIds { taken.append("no-msg-id (publishes and user messages without client message ids)") }
        return taken
    }

    /// Cluster runs (`rtm bench cluster`): the nodes' endpoints, one service over one database.
    /// Empty: `host`/`port` alone. Group g's publisher connects to node g mod N; its subscribers
    /// as `placement` says.
    public var nodes: [BenchEndpoint] = []
    /// Where a group's subscribers connect in a cluster run.
    public var placement: BenchPlacement = .remote

    /// The endpoint of group `group`'s publisher.
    public func publisherEndpoint(group: Int) -> BenchEndpoint {
        nodes.isEmpty ? BenchEndpoint(host: host, port: port) : nodes[group % nodes.count]
    }

    /// The endpoint of the `index`-th subscriber (0-based) of group `group`: with `.remote`,
    /// round the nodes other than the publisher's (every delivery crosses the database to
    /// another node); with `.spread`, round all of them, the publisher's included.
    public func subscriberEndpoint(group: Int, index: Int) -> BenchEndpoint {
        guard nodes.count > 1 else { return publisherEndpoint(group: group) }
        let home = group % nodes.count
        switch placement {
        case .remote: return nodes[(home + 1 + index % (nodes.count - 1)) % nodes.count]
        case .spread: return nodes[(home + index) % nodes.count]
        }
    }

    public init() {}

    /// Parses `ws://host:port[/path]`.
    public mutating func setURL(_ url: String) throws {
        guard url.hasPrefix("ws://") else { throw BenchError("only ws:// URLs are supported: \(url)") }
        var rest = Substring(url.dropFirst(5))
        path = "/"
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[slash...])
            rest = rest[..<slash]
        }
        guard let colon = rest.lastIndex(of: ":"), let p = Int(rest[rest.index(after: colon)...]) else {
            throw BenchError("the URL needs a port: \(url)")
        }
        host = String(rest[..<colon])
        port = p
    }
}

/// One node a bench client connects to.
public struct BenchEndpoint: Sendable, Hashable {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
}

/// Where a cluster run's subscribers connect (`LoadOptions.placement`).
public enum BenchPlacement: String, Sendable, Codable, CaseIterable {
    /// Only on nodes other than their publisher's: every delivery is a cross-node one.
    case remote
    /// Over all nodes, the publisher's included (the fan-out a cluster gives a channel).
    case spread
}

/// A benchmark that could not run, and why.
public struct BenchError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
