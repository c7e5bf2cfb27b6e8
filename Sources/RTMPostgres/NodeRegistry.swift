import Foundation
import Logging
import NIOCore
import PostgresNIO
import RTMServer

/// A node's lease in `rtm_node`: renewed every `interval` for `lease` from
/// the database's clock (no clock skew between nodes), and the other nodes' leases checked at
/// the same time. A node that stops renewing (kill -9, a lost host, cut off from the database)
/// is declared dead by every survivor within `lease + interval` of its last renewal.
public final class NodeRegistry: Sendable {
    private let client: PostgresClient
    private let node: String
    private let host: String
    private let interval: TimeAmount
    private let lease: TimeAmount
    private let logger: Logger

    public init(client: PostgresClient, node: String, host: String = ProcessInfo.processInfo.hostName, interval: TimeAmount,
                lease: TimeAmount, logger: Logger) {
        self.client = client
        self.node = node
        self.host = host
        self.interval = interval
        self.lease = lease
        self.logger = logger
    }

    /// Renews this node's lease (`first`: this process's first registration: `started_at` is
    /// set again).
    public func renew(first: Bool) async throws {
        let millis = Int64(lease.nanoseconds / 1_000_000)
        // Bounded by the lease: a renewal that takes longer is of no use (`BoundedCall`).
        try await BoundedCall.run("a lease renewal", timeout: lease) { [self] in
            try await client.query("""
                INSERT INTO rtm_node AS n (node_id, lease_until, started_at, host)
                VALUES (\(node), now() + \(millis)::int8 * interval '1 millisecond', now(), \(host))
                ON CONFLICT (node_id) DO UPDATE SET lease_until = EXCLUDED.lease_until, host = EXCLUDED.host,
                    started_at = CASE WHEN \(first) THEN EXCLUDED.started_at ELSE n.started_at END
                """, logger: logger)
        }
    }

    /// Every registered node and whether its lease still runs.
    public func leases() async throws -> [String: Bool] {
        try await BoundedCall.run("the lease check", timeout: lease) { [self] in
            var leases: [String: Bool] = [:]
            for try await (node, alive) in try await client.query("SELECT node_id, lease_until > now() FROM rtm_node", logger: logger)
                .decode((String, Bool).self) { leases[node] = alive }
            return leases
        }
    }

    /// Renews and checks every `interval` until cancelled, reporting deaths, returns and the
    /// live count to `events`. While the database cannot be reached nothing is declared, nor for
    /// a lease after it is back (`NodeLiveness`).
    public func run(events: @Sendable (BackplaneEvent) async -> Void) async {
        var liveness = NodeLiveness(me: node, lease: lease)
        var first = true
        var failing = false
        while !Task.isCancelled {
            do {
                try await renew(first: first)
                first = false
                let current = try await leases()
                for event in liveness.observe(current, at: .now()) { await events(event) }
                failing = false
            } catch {
                liveness.lostSight()
                if !failing && !Task.isCancelled {
                    failing = true
                    logger.warning("cannot renew this node's lease", metadata: ["node": "\(node)", "error": "\(error)"])
                }
            }
            try? await Task.sleep(nanoseconds: UInt64(interval.nanoseconds))
        }
    }
}
