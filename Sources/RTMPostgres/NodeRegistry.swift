import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import RTMServer

/// A node's lease in `rtm_node`: renewed every `interval` for `lease` from
/// the database's clock (no clock skew between nodes), and the other nodes' leases checked at
/// the same time. A node that stops renewing (kill -9, a lost host, cut off from the database,
/// paused) is declared dead by every survivor within `lease + interval` of its last renewal.
///
/// **Fencing.** A survivor declares a node dead only by marking its row (`fenced_at`) while
/// its lease is still lapsed, in one statement; a renewal succeeds only while the row is not
/// marked. So either the node renewed in time and nobody declares it dead, or it is declared
/// dead and its next renewal finds out (`Renewal.fenced`): it then tells its hub
/// (`BackplaneEvent.fenced`: its sessions are the others' now, its clients are sent away) and
/// only then joins again. A node also knows, by its own monotonic clock, until when its lease
/// surely runs (`ensureLease`): past that (it was paused, or could not renew) it renews before
/// it commits anything, so a node that wakes from a pause learns it was declared dead before
/// it acts.
public final class NodeRegistry: Sendable {
    /// What a renewal found.
    public enum Renewal: Sendable, Equatable {
        /// The lease runs again for `lease`.
        case renewed
        /// The other nodes declared this node dead since its last renewal: not renewed.
        case fenced
    }

    private let client: PostgresClient
    private let node: String
    private let host: String
    private let interval: TimeAmount
    private let lease: TimeAmount
    /// The bound of the renewal a commit waits for (`ensureLease`): a publisher's refusal must
    /// come within the client's request timeout.
    private let callTimeout: TimeAmount
    private let logger: Logger
    /// Until when the lease surely runs: the start of the last successful renewal + `lease`
    /// (the database counts from later), by this process's monotonic clock.
    private let knownUntil = NIOLockedValueBox<NIODeadline?>(nil)
    /// Where this node answers `/health` for the others ("host:port"; `advertise`), written
    /// with every renewal.
    private let address = NIOLockedValueBox<String?>(nil)
    /// The other live nodes' addresses, as last read (`leases`): whom a node that lost the
    /// database asks whether they still reach it.
    private let peerAddresses = NIOLockedValueBox<[String]>([])

    /// - Parameter callTimeout: the bound of a renewal made before a commit (`ensureLease`);
    ///   the loop's renewals are bounded by the lease.
    public init(client: PostgresClient, node: String, host: String = ProcessInfo.processInfo.hostName, interval: TimeAmount,
                lease: TimeAmount, callTimeout: TimeAmount = .seconds(5), logger: Logger) {
        self.client = client
        self.node = node
        self.host = host
        self.interval = interval
        self.lease = lease
        self.callTimeout = min(callTimeout, lease)
        self.logger = logger
    }

    /// Where this node answers `/health` for the others ("host:port"), known once it listens.
    public func advertise(_ address: String) {
        self.address.withLockedValue { $0 = address }
    }

    /// Registers this process as the node's new run (`started_at` set again, any fence of an
    /// earlier run lifted), or, after a fence was dealt with, the same run again.
    public func register(newRun: Bool) async throws {
        let started = NIODeadline.now()
        let millis = Int64(lease.nanoseconds / 1_000_000)
        let address = self.address.withLockedValue { $0 }
        try await BoundedCall.run("a lease registration", timeout: lease) { [self] in
            try await client.query("""
                INSERT INTO rtm_node AS n (node_id, lease_until, started_at, host, address)
                VALUES (\(node), now() + \(millis)::int8 * interval '1 millisecond', now(), \(host), \(address))
                ON CONFLICT (node_id) DO UPDATE SET lease_until = EXCLUDED.lease_until, host = EXCLUDED.host, fenced_at = NULL,
                    address = EXCLUDED.address,
                    started_at = CASE WHEN \(newRun) THEN EXCLUDED.started_at ELSE n.started_at END
                """, logger: logger)
        }
        knownUntil.withLockedValue { $0 = started + lease }
    }

    /// Renews this node's lease, unless the others declared it dead meanwhile. Bounded by the
    /// lease (a renewal that takes longer is of no use), or by `timeout`.
    public func renew(timeout: TimeAmount? = nil) async throws -> Renewal {
        let started = NIODeadline.now()
        let millis = Int64(lease.nanoseconds / 1_000_000)
        let address = self.address.withLockedValue { $0 }
        let renewal: Renewal? = try await BoundedCall.run("a lease renewal", timeout: timeout ?? lease) { [self] in
            var renewed = false
            for try await _ in try await client.query("""
                UPDATE rtm_node SET lease_until = now() + \(millis)::int8 * interval '1 millisecond', host = \(host),
                    address = coalesce(\(address), address)
                WHERE node_id = \(node) AND fenced_at IS NULL RETURNING true
                """, logger: logger).decode(Bool.self) { renewed = true }
            if renewed { return Renewal.renewed }
            var fenced = false
            for try await value in try await client.query("SELECT fenced_at IS NOT NULL FROM rtm_node WHERE node_id = \(node)",
                                                          logger: logger).decode(Bool.self) { fenced = value }
            return fenced ? Renewal.fenced : nil   // nil: the row is gone (removed by hand): registered again
        }
        switch renewal {
        case .renewed?:
            knownUntil.withLockedValue { $0 = started + lease }
            return .renewed
        case .fenced?:
            return .fenced
        case nil:
            try await register(newRun: false)
            return .renewed
        }
    }

    /// Before this node commits for the cluster: returns at once while its lease surely runs;
    /// past that (a pause, renewals failing) renews first. Throws `NodeFenced` when the others
    /// declared this node dead.
    public func ensureLease() async throws {
        if let until = knownUntil.withLockedValue({ $0 }), NIODeadline.now() < until { return }
        if try await renew(timeout: callTimeout) == .fenced { throw NodeFenced() }
    }

    /// Whether this node reaches the database now: a renewal bounded by `timeout` (at most
    /// `callTimeout`) got an answer (the lease renewed, or the others declared this node dead:
    /// the loop's next round reports that, `run`).
    public func reachesDatabase(within timeout: TimeAmount) async -> Bool {
        (try? await renew(timeout: min(timeout, callTimeout))) != nil
    }

    /// Declares `node` dead in the database if its lease is still lapsed: true when it is
    /// declared (now, or already by another node), false when it renewed meanwhile.
    public func fence(_ node: String) async throws -> Bool {
        try await BoundedCall.run("declaring a node dead", timeout: lease) { [self] in
            var declared = false
            for try await _ in try await client.query("""
                UPDATE rtm_node SET fenced_at = coalesce(fenced_at, now()) WHERE node_id = \(node) AND lease_until <= now() RETURNING true
                """, logger: logger).decode(Bool.self) { declared = true }
            return declared
        }
    }

    /// Every registered node and whether its lease still runs (the other live nodes'
    /// addresses are kept for `run`'s `leaseLapsed`).
    public func leases() async throws -> [String: Bool] {
        let (leases, peers) = try await BoundedCall.run("the lease check", timeout: lease) { [self] in
            var leases: [String: Bool] = [:]
            var peers: [String] = []
            for try await (other, alive, address) in try await client.query("SELECT node_id, lease_until > now(), address FROM rtm_node",
                                                                            logger: logger).decode((String, Bool, String?).self) {
                leases[other] = alive
                if alive, other != node, let address { peers.append(address) }
            }
            return (leases, peers.sorted())
        }
        peerAddresses.withLockedValue { $0 = peers }
        return leases
    }

    /// Renews and checks every `interval` until cancelled (after `register(newRun: true)`),
    /// reporting this node's fence, the others' deaths and returns, and the live count to
    /// `events`. While the database cannot be reached nothing is declared, nor for a lease after
    /// it is back (`NodeLiveness`).
    public func run(events: @Sendable (BackplaneEvent) async -> Void) async {
        var liveness = NodeLiveness(me: node, lease: lease)
        var failing = false
        var lapsed = false   // reported `.leaseLapsed`, not renewed since
        while !Task.isCancelled {
            do {
                let renewal = try await renew()
                defer { lapsed = false }
                if renewal == .fenced {
                    logger.warning("this node was declared dead by the others (it could not renew its lease in time: paused, or cut off from the database): its clients are sent away, then it joins again",
                                   metadata: ["node": "\(node)"])
                    await events(.fenced)
                    try await register(newRun: false)
                }
                if lapsed { await events(.leaseRenewed) }
                let current = try await leases()
                for event in liveness.observe(current, at: .now()) {
                    if case .nodeDied(let dead) = event {
                        let declared: Bool
                        do { declared = try await fence(dead) } catch { liveness.undeclare(dead); throw error }
                        guard declared else { liveness.undeclare(dead); continue }   // it renewed meanwhile
                    }
                    await events(event)
                }
                failing = false
            } catch {
                liveness.lostSight()
                if !failing && !Task.isCancelled {
                    failing = true
                    logger.warning("cannot renew this node's lease", metadata: ["node": "\(node)", "error": "\(error)"])
                }
                // Its lease surely ran out unrenewed: the others, if they reach the database,
                // declare it dead now (cut off), or the database is down for everybody. Told
                // at every failed round while it lasts, with whom to ask which it is.
                if !Task.isCancelled, let until = knownUntil.withLockedValue({ $0 }), NIODeadline.now() >= until {
                    if !lapsed {
                        logger.warning("this node's lease ran out while it could not reach the database: asking the other nodes whether they reach it",
                                       metadata: ["node": "\(node)"])
                    }
                    lapsed = true
                    await events(.leaseLapsed(peers: peerAddresses.withLockedValue { $0 }))
                }
            }
            try? await Task.sleep(nanoseconds: UInt64(interval.nanoseconds))
        }
    }
}
