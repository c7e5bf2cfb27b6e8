import NIOCore
import RTMServer

/// Which nodes of the cluster are alive, from the leases in `rtm_node`: a plain value fed each
/// check's leases and the time, returning the events to report. A node is declared dead once,
/// when its lease has passed; it is back when it renews again.
///
/// A node that could not reach the database judges nobody by it until a whole lease has passed
/// since it reached it again: every lease lapses during an outage of the database, and the other
/// nodes need that long to renew theirs once it is back. Without this pause the first node to
/// read the leases after an outage would declare every other node dead, and their members would
/// time out everywhere (SPEC P-2).
public struct NodeLiveness: Sendable {
    /// This node (never declared dead by itself).
    public let me: String
    /// Nodes declared dead and not back.
    public private(set) var dead: Set<String> = []
    private let lease: TimeAmount
    private var lastLiveCount: Int?
    /// Set while the database cannot be read; the first check after it is back starts the pause.
    private var blind = false
    /// No node is declared dead before this time.
    private var judgeFrom: NIODeadline?

    /// - Parameter lease: how long a lease lasts after its renewal (the pause after an outage).
    public init(me: String, lease: TimeAmount) {
        self.me = me
        self.lease = lease
    }

    /// The database could not be read (a renewal or a check failed). Before the first check
    /// that succeeded there is nothing to pause: leases that lapsed before this node started
    /// are judged at once.
    public mutating func lostSight() {
        if lastLiveCount != nil { blind = true }
    }

    /// `node`'s death was not confirmed (it renewed before it could be declared dead, or the
    /// database could not be asked): it is judged again at the next check.
    public mutating func undeclare(_ node: String) {
        dead.remove(node)
    }

    /// Takes every node's lease state (`true`: its lease has not passed) read at `now` and
    /// returns the events: deaths and returns, then the live count when it changed.
    public mutating func observe(_ leases: [String: Bool], at now: NIODeadline) -> [BackplaneEvent] {
        if blind {
            blind = false
            judgeFrom = now + lease
        }
        let judging = judgeFrom.map { now >= $0 } ?? true
        var events: [BackplaneEvent] = []
        for (node, alive) in leases.sorted(by: { $0.key < $1.key }) where node != me {
            if !alive && judging && dead.insert(node).inserted { events.append(.nodeDied(node: node)) }
            if alive && dead.remove(node) != nil { events.append(.nodeReturned(node: node)) }
        }
        dead.formIntersection(leases.keys)   // rows removed: forgotten
        let live = leases.filter { $0.value || ($0.key != me && !judging && !dead.contains($0.key)) }.count
        if live != lastLiveCount {
            lastLiveCount = live
            events.append(.liveNodes(live))
        }
        return events
    }
}
