import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore

/// Cluster mode: what a node knows of the cluster's health: the
/// link to the shared database (from the backplane's link events and from publish commits),
/// the nodes with a live lease, and the lag of the channel log. Each change of the link and
/// each node's death or return is logged once; all of it is in `/metrics`, the link also in
/// the body of `/health` and `/ready`.
///
/// Metrics: `rtm_database_up` (1/0), `rtm_cluster_publish_commit_seconds` (histogram),
/// `rtm_cluster_log_lag_seconds` (publish time → applied on this node, last batch),
/// `rtm_cluster_nodes` (live leases), `rtm_cluster_gaps_total` (numbers given up on),
/// `rtm_cluster_publish_failures_total` (publishes answered with an error: refused or failed),
/// `rtm_cluster_fenced_total` (times the others declared this node dead),
/// `rtm_cluster_channels_followed` (channels the backplane delivers to this node: those it has
/// subscribers or replay buffers for), `rtm_cluster_messages_applied_total` (message-channel
/// messages it delivered to this node; stream topics and the cluster's own events not counted).
final class ClusterStatus: Sendable {
    private struct State {
        var databaseUp = true
        /// The backplane's listening connection, as last reported: while it is lost, only its
        /// return brings the link back up.
        var listenerUp = true
        /// When a commit may next be tried while the link is down on a failed commit.
        var nextProbe = NIODeadline.uptimeNanoseconds(0)
        var liveNodes = 0
    }

    /// False on a single node: nothing here is reported.
    let enabled: Bool
    private let state = NIOLockedValueBox(State())
    private let logger: Logger
    private let databaseUpGauge: Metrics.Gauge?
    private let nodesGauge: Metrics.Gauge?
    private let lagGauge: Metrics.Gauge?
    private let commitTimer: Metrics.Timer?
    private let gapCounter: Metrics.Counter?
    private let refusedCounter: Metrics.Counter?
    private let fencedCounter: Metrics.Counter?
    private let lapsedCounter: Metrics.Counter?
    private let cutOffCounter: Metrics.Counter?
    private let followedGauge: Metrics.Gauge?
    private let appliedCounter: Metrics.Counter?
    /// Whether this node is cut off from the database while the others reach it.
    private let partition = NIOLockedValueBox(PartitionWatch())
    private let probeInterval: TimeAmount
    /// How many times the others declared this node dead (`fenced`) and the commits under way
    /// (a connection accepted before the last time commits nothing), with the fence waiting for
    /// the commits of the generation it ended.
    private let fencing = NIOLockedValueBox<(gate: FenceGate, drained: CheckedContinuation<Void, Never>?)>((FenceGate(), nil))

    init(metrics: ServerMetrics, enabled: Bool, probeInterval: TimeAmount = .seconds(1), logger: Logger) {
        self.enabled = enabled
        self.probeInterval = probeInterval
        self.logger = logger
        guard enabled else {
            (databaseUpGauge, nodesGauge, lagGauge, commitTimer, gapCounter, refusedCounter, fencedCounter, lapsedCounter, cutOffCounter) =
                (nil, nil, nil, nil, nil, nil, nil, nil, nil)
            (followedGauge, appliedCounter) = (nil, nil)
            return
        }
        let factory = metrics.factory
        databaseUpGauge = Metrics.Gauge(label: "rtm_database_up", factory: factory)
        nodesGauge = Metrics.Gauge(label: "rtm_cluster_nodes", factory: factory)
        lagGauge = Metrics.Gauge(label: "rtm_cluster_log_lag_seconds", factory: factory)
        commitTimer = Metrics.Timer(label: "rtm_cluster_publish_commit_seconds", factory: factory)
        gapCounter = Metrics.Counter(label: "rtm_cluster_gaps_total", factory: factory)
        refusedCounter = Metrics.Counter(label: "rtm_cluster_publish_failures_total", factory: factory)
        fencedCounter = Metrics.Counter(label: "rtm_cluster_fenced_total", factory: factory)
        lapsedCounter = Metrics.Counter(label: "rtm_cluster_lease_lapses_total", factory: factory)
        cutOffCounter = Metrics.Counter(label: "rtm_cluster_cut_off_total", factory: factory)
        followedGauge = Metrics.Gauge(label: "rtm_cluster_channels_followed", factory: factory)
        appliedCounter = Metrics.Counter(label: "rtm_cluster_messages_applied_total", factory: factory)
        followedGauge?.record(0)
        databaseUpGauge?.record(1)
        nodesGauge?.record(0)
        lagGauge?.record(0.0)
    }

    /// Whether the database link is up (always true on a single node).
    var databaseUp: Bool { state.withLockedValue { $0.databaseUp } }

    /// Whether a commit may be tried now: always while the link is up. While it is down on a
    /// failed commit only (the listening connection up), one commit every `probeInterval`: its
    /// success brings the link back; without it a commit that failed once (a failover, a slow
    /// moment) would keep the node refusing publishes while the database answers again. While
    /// the listening connection is lost, none: its return brings the link back.
    func admitsCommit(now: NIODeadline = .now()) -> Bool {
        state.withLockedValue { state in
            if state.databaseUp { return true }
            guard state.listenerUp else { return false }
            guard now >= state.nextProbe else { return false }
            state.nextProbe = now + probeInterval
            return true
        }
    }

    /// The nodes with a live lease, as last reported.
    var liveNodes: Int { state.withLockedValue { $0.liveNodes } }

    /// What `/health` and `/ready` add to their body: nothing on a single node.
    var healthDetail: String {
        guard enabled else { return "" }
        return (databaseUp ? "database: up\n" : "database: down\n") + partition.withLockedValue { $0.healthDetail }
    }

    /// What a change of the link was learnt from.
    enum LinkEvidence {
        /// The backplane's listening connection was lost or is back.
        case listener
        /// A commit (publish, stream channel message) succeeded or failed.
        case commit
    }

    /// The link went up or down; logged on change. While the listening connection is lost a
    /// commit's success is not taken as the link's return: a commit sent before the loss may
    /// end after it, and with the link down nothing else would correct it (new commits are
    /// refused at once), so the node would say "up" with the database gone.
    func setDatabase(up: Bool, reason: String, from evidence: LinkEvidence) {
        let changed = state.withLockedValue { state -> Bool in
            if evidence == .listener { state.listenerUp = up }
            if up && !state.listenerUp { return false }
            guard state.databaseUp != up else { return false }
            state.databaseUp = up
            // Under the lock, so the gauge follows the changes in their order.
            databaseUpGauge?.record(up ? 1 : 0)
            return true
        }
        guard changed else { return }
        if up {
            logger.notice("database link up", metadata: ["reason": "\(reason)"])
        } else {
            logger.error("database link down: publishes fail until it is back; local traffic continues", metadata: ["reason": "\(reason)"])
        }
    }

    /// A publish commit took `nanoseconds`.
    func committed(nanoseconds: Int64) {
        commitTimer?.recordNanoseconds(nanoseconds)
    }

    /// A batch applied here: `count` message-channel messages, the newest published `lagMillis` ago.
    func applied(_ count: Int, lagMillis: Int64) {
        lagGauge?.record(Double(max(0, lagMillis)) / 1000)
        appliedCounter?.increment(by: Int64(count))
    }

    /// How many channels the backplane delivers to this node, or is starting to (`ChannelInterest`;
    /// set at each scrape).
    func followed(_ count: Int) {
        followedGauge?.record(count)
    }

    /// Publishes answered with an error because their commit was refused or failed (logged
    /// once per change of the link, counted here one by one).
    func publishesFailed(_ count: Int) {
        refusedCounter?.increment(by: Int64(count))
    }

    /// The others declared this node dead (`BackplaneEvent.fenced`): counted, connections
    /// accepted before now commit nothing more (`fenceCount` moved on), and it returns once
    /// their commits under way ended (each is bounded): only then may the node join again
    /// (`FenceGate`).
    func fenced() async {
        fencedCounter?.increment()
        // It reached the database to learn this: a lapse of its lease ends here, and never
        // turns into a cut-off (its clients were told the fence; `PartitionWatch`).
        partition.withLockedValue { $0.renewed() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waits = fencing.withLockedValue { fencing in
                guard fencing.gate.fence() else { return false }
                fencing.drained = continuation   // resumed by the last commit's end
                return true
            }
            if !waits { continuation.resume() }
        }
    }

    /// This node's lease ran out while it could not reach the database (`BackplaneEvent.leaseLapsed`,
    /// at every failed round): true when the other nodes (`peers`) are to be asked now
    /// whether they reach it (`PartitionWatch`).
    func leaseLapsed(peers: [String]) -> Bool {
        let (first, ask) = partition.withLockedValue { watch in (watch.phase == .joined, watch.lapsed(peers: peers)) }
        if first { lapsedCounter?.increment() }
        return ask
    }

    /// The other nodes answered (`PartitionWatch.Finding`).
    func probed(othersReachDatabase: Bool) -> PartitionWatch.Finding {
        partition.withLockedValue { $0.probed(othersReachDatabase: othersReachDatabase) }
    }

    /// This node tried the database after the others said they reach it: true when it is cut
    /// off now (its clients are to be sent away; `PartitionWatch.confirmed`).
    func confirmed(reachesDatabase: Bool) -> Bool {
        let cutOff = partition.withLockedValue { $0.confirmed(reachesDatabase: reachesDatabase) }
        if cutOff { cutOffCounter?.increment() }
        return cutOff
    }

    /// The lease was renewed after it ran out.
    func leaseRenewed() {
        partition.withLockedValue { $0.renewed() }
    }

    /// Cut off from the database while the other nodes reach it (`/ready` answers 503).
    var isCutOff: Bool { partition.withLockedValue { $0.isCutOff } }

    /// How many times this node was declared dead so far.
    var fenceCount: Int { fencing.withLockedValue { $0.gate.generation } }

    /// Runs `commit` for a connection accepted when the fence count was `accepted`; throws
    /// `NodeFenced` without running it once the node was declared dead since (`FenceGate`).
    func committing<T: Sendable>(accepted: Int, _ commit: () async throws -> T) async throws -> T {
        guard fencing.withLockedValue({ $0.gate.begin(accepted: accepted) }) else { throw NodeFenced() }
        let result: Result<T, any Error>
        do { result = .success(try await commit()) } catch { result = .failure(error) }
        let drained = fencing.withLockedValue { fencing in fencing.gate.end(accepted: accepted) ? fencing.drained.take() : nil }
        drained?.resume()
        return try result.get()
    }

    /// Numbers given up on (a gap notice was sent).
    func gaps(_ count: Int) {
        gapCounter?.increment(by: Int64(count))
    }

    /// The number of nodes with a live lease (`BackplaneEvent.liveNodes`). Which nodes are
    /// dead is the hub's to keep (`ClusterReplica.deadNodes`): their sessions depend on it.
    func liveNodesChanged(_ count: Int) {
        state.withLockedValue { $0.liveNodes = count }
        nodesGauge?.record(count)
    }
}

/// A commit refused because the other nodes declared this node dead (its lease lapsed: it was
/// paused, or cut off from the database): nothing was stored (`BackplaneEvent.fenced`).
public struct NodeFenced: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "this node was declared dead by the cluster (it could not renew its lease in time)" }
}

/// A publish refused because this node knows the shared database is unreachable.
struct DatabaseLinkDown: Error, CustomStringConvertible {
    var description: String { "the cluster's database is unreachable from this node" }
}

/// A call to the cluster's database that got no answer in time; its description says which
/// call and how long, in words a client may read (the backplane's timeouts adopt it).
public protocol DatabaseTimeout: Error, CustomStringConvertible {}

/// Why a commit through the cluster's database failed, in the words sent to the client (never
/// a library's error text): refused before anything was sent (nothing stored), or failed after
/// the statement may have reached the database, so that the message may be stored (M-3: the
/// client resends with the same msgId and the resend is recognised).
public enum ClusterCommitFailure {
    /// What a failed store call was, for the node's log: in our words where we know them (a
    /// commit abandoned with the link, a deadline), else the driver's full description (the
    /// PostgreSQL driver's plain description hides the cause).
    public static func logDescription(_ error: any Error) -> String {
        if error is CancellationError { return "abandoned when the database link was lost" }
        if error is DatabaseLinkDown { return "refused: the database link is down" }
        if let timeout = error as? any DatabaseTimeout { return timeout.description }
        return String(reflecting: error)
    }

    /// The reason for the error reply.
    public static func reason(_ error: any Error) -> String {
        if error is DatabaseLinkDown {
            return "the cluster's database is unreachable from this node: nothing was stored; retry later"
        }
        if let late = error as? PublishDeadlinePassed {
            let within = late.seconds == late.seconds.rounded() ? String(Int(late.seconds)) : String(late.seconds)
            return late.sent
                ? "the cluster's database did not answer within \(within) s: the outcome is unknown; resend with the same msgId"
                : "the cluster's database did not take the message within \(within) s: nothing was stored; retry"
        }
        if error is NodeFenced {
            return "this node was declared dead by the cluster (paused or cut off past its lease): nothing was stored; reconnect and resend"
        }
        let what: String
        if error is CancellationError {
            what = "the database link was lost during the commit"
        } else if let timeout = error as? any DatabaseTimeout {
            what = timeout.description
        } else {
            what = "the database connection failed during the commit"
        }
        return "\(what): the outcome is unknown; resend with the same msgId"
    }
}
