import NIOCore

/// Asks other nodes whether they reach the cluster's database: `GET /health` on each
/// ("host:port"), concurrently, each bounded by `timeout`; true as soon as one answers with
/// "database: up" (`PartitionWatch`). A node that cannot be reached or does not answer in time
/// counts as not reaching it.
enum PeerHealthProbe {
    static func anyReachesDatabase(_ peers: [String], loop: any EventLoop, timeout: TimeAmount) async -> Bool {
        await withTaskGroup(of: Bool.self) { tasks in
            for peer in peers {
                tasks.addTask { await health(of: peer, loop: loop, timeout: timeout)?.contains("database: up") ?? false }
            }
            for await up in tasks where up {
                tasks.cancelAll()
                return true
            }
            return false
        }
    }

    /// The body of the answer to `GET /health` from `address` ("host:port", the host may be
    /// `[v6]`); nil when it cannot be had within `timeout` (`WebhookHTTPClient`'s rules).
    static func health(of address: String, loop: any EventLoop, timeout: TimeAmount) async -> String? {
        guard let target = WebhookHTTPClient.Target("http://\(address)/health"),
              let client = try? WebhookHTTPClient(target: target, timeout: timeout, group: loop),
              let reply = try? await client.get(userAgent: "rtm-cluster").get() else { return nil }
        return String(buffer: reply.body)
    }
}
