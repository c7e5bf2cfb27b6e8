import Foundation

/// The admin API's JSON bodies (`openapi/admin.yaml` describes each). Optional fields are left
/// out of a response when nil.
enum AdminModels {
    struct ErrorBody: Codable, Sendable {
        /// A stable machine-readable name (`unauthorized`, `badRequest`, `notFound`, …).
        let error: String
        let message: String
        /// The RTM error code (PROTOCOL.md §5) where one applies.
        var code: Int?
    }

    struct Info: Codable, Sendable {
        struct Connections: Codable, Sendable {
            let message: Int
            let stream: Int
            let peakMessage: Int
            let open: Int
        }
        struct Counters: Codable, Sendable {
            let channelMessages: UInt64
            let userMessages: UInt64
        }
        let version: String
        let node: String
        let startedAt: Int64
        let uptimeSeconds: Double
        let now: Int64
        let apps: [String]
        let connections: Connections
        let sessions: Int
        let channels: Int
        let bans: Int
        let counters: Counters
        /// Requests refused since start, by request type and error code, most first.
        let refusals: [Refusal]
        /// Webhook delivery (absent when no webhook is configured).
        let webhooks: WebhookStats?
        /// Cluster mode: every node as this one knows it (absent on a single node).
        var cluster: Cluster?
    }

    /// The cluster as one node sees it: the nodes it has heard from through the log (every
    /// node answers a new one's hello), each with its sessions.
    struct Cluster: Codable, Sendable {
        /// This node's id (`--node-id`).
        let node: String
        /// This node's link to the database.
        let database: String
        /// Nodes whose lease the database holds as live.
        let liveNodes: Int
        let nodes: [ClusterNode]
    }

    struct ClusterNode: Codable, Sendable {
        let node: String
        /// Its current run (`node#run`; a restart makes a new one).
        let instance: String
        /// `this`, `alive`, or `dead` (its lease ran out: its sessions are in their grace window).
        let state: String
        /// The sessions it holds.
        let sessions: Int
    }

    struct Refusal: Codable, Sendable {
        let operation: String
        let code: Int
        let name: String
        let count: Int
    }

    struct ChannelItem: Codable, Sendable {
        let appId: String
        let name: String
        let members: Int
        let visibleMembers: Int
        let lastSeq: UInt64
    }

    struct Channels: Codable, Sendable {
        let channels: [ChannelItem]
        /// Every channel that matches, on every page.
        let total: Int
        /// The next page's cursor (`page=`), while channels remain after this page.
        var nextPage: String?
    }

    struct Member: Codable, Sendable {
        let userId: String
        let quiet: Bool
        let state: [String: String]
    }

    struct Message: Codable, Sendable {
        var seq: UInt64?
        let ts: Int64
        let publisher: String
        var text: String?
        var data: Data?
        var customType: String?
    }

    struct Channel: Codable, Sendable {
        let appId: String
        let name: String
        let visibleMembers: Int
        let lastSeq: UInt64
        let members: [Member]
        /// The channel's last messages (the replay buffer: last 30 s, at most 32), oldest first.
        let recent: [Message]
    }

    struct Session: Codable, Sendable {
        let appId: String
        let userId: String
        let online: Bool
        let channels: [String]
        /// Cluster mode: the node that holds it.
        var node: String?
        /// Its MESSAGE connection, while online.
        var connection: Connection?
    }

    /// One client connection, inspected on its event loop (NATS' `connz`).
    struct Connection: Codable, Sendable {
        /// The peer's IP address.
        let address: String?
        /// The node serving it (`info.node`).
        let node: String
        /// When it connected (ms since the Unix epoch).
        let connectedAt: Int64
        /// Milliseconds since its last whole frame (its liveness, SPEC T-3).
        let idleMs: Int64
        /// WebSocket messages it sent, and their bytes.
        let messagesIn: Int
        let bytesIn: Int
        /// Messages it was sent (each channel message of a shared frame counts), and their bytes.
        let messagesOut: Int
        let bytesOut: Int
        /// Bytes written to it and not yet taken by its socket (its backlog; past the server's
        /// maxOutboundBytes it is cut off as a slow consumer).
        let pendingBytes: Int
        /// Its `User-Agent` at the upgrade (the SDK sends `swift-rtm/VERSION`).
        let userAgent: String?
    }

    struct Sessions: Codable, Sendable {
        var sessions: [Session]
        /// Every session that matches, on every page.
        let total: Int
        /// The next page's cursor (`page=`), while sessions remain after this page.
        var nextPage: String?
    }

    struct PublishRequest: Codable, Sendable {
        var appId: String?
        let channel: String
        var message: String?
        var data: Data?
        var customType: String?
        var publisher: String?
        var storeInHistory: Bool?
    }

    struct PublishResult: Codable, Sendable {
        let channel: String
        let seq: UInt64
        let epoch: String
        var historyTs: Int64?
    }

    struct SendRequest: Codable, Sendable {
        var appId: String?
        let user: String
        var message: String?
        var data: Data?
        var customType: String?
        var from: String?
        var storeInHistory: Bool?
    }

    struct SendResult: Codable, Sendable {
        let user: String
        let messageId: Int64
        let receiverOnline: Bool
    }

    struct WhoNow: Codable, Sendable {
        let channel: String
        let users: [String]
        var states: [String: [String: String]]?
        let total: Int
        var nextPage: String?
    }

    struct WhereNow: Codable, Sendable {
        let user: String
        let channels: [String]
    }

    struct History: Codable, Sendable {
        let channel: String
        let channelType: String
        let messages: [Message]
        let newStart: Int64
    }

    struct UserRequest: Codable, Sendable {
        var appId: String?
        let user: String
        var reason: String?
    }

    struct Disconnected: Codable, Sendable {
        let user: String
        let disconnected: Bool
    }

    struct KickRequest: Codable, Sendable {
        var appId: String?
        let user: String
        var reason: String?
        var banSeconds: Double?
    }

    struct BanRequest: Codable, Sendable {
        var appId: String?
        let user: String
        let seconds: Double
        var reason: String?
    }

    struct Kicked: Codable, Sendable {
        let user: String
        let sessionEnded: Bool
        var bannedUntil: Int64?
    }

    struct Unbanned: Codable, Sendable {
        let user: String
        let unbanned: Bool
    }

    struct Ban: Codable, Sendable {
        let appId: String
        let user: String
        let until: Int64
        let reason: String
    }

    struct Bans: Codable, Sendable {
        let bans: [Ban]
    }

    struct RevokeRequest: Codable, Sendable {
        var appId: String?
        var user: String?
        var token: String?
        var reason: String?
    }

    struct Revoked: Codable, Sendable {
        /// `token` (that one token) or `user` (every token of the user issued before `before`).
        let scope: String
        let sessionsEnded: Int
        var before: UInt32?
    }
}
