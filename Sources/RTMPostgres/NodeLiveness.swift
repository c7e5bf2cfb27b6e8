import RTMServer

/// Which nodes of the cluster are alive, from the leases in `rtm_node` (issue 13 item 5): a
/// plain value fed each check's leases, returning the events to report. A node is declared
/// dead once, when its lease has passed; it is back when it renews again.
public struct NodeLiveness: Sendable {
    /// This node (never declared dead by itself).
    public let me: String
    /// Nodes declared dead and not back.
    public private(set) var dead: Set<String> = []
    private var lastLiveCount: Int?

    public init(me: String) {
        self.me = me
    }

    /// Takes every node's lease state (`true`: its lease has not passed) and returns the
    /// events: deaths and returns, then the live count when it changed.
    public mutating func observe(_ leases: [String: Bool]) -> [BackplaneEvent] {
        var events: [BackplaneEvent] = []
        for (node, alive) in leases.sorted(by: { $0.key < $1.key }) where node != me {
            if !alive && dead.insert(node).inserted { events.append(.nodeDied(node: node)) }
            if alive && dead.remove(node) != nil { events.append(.nodeReturned(node: node)) }
        }
        dead.formIntersection(leases.keys)   // rows removed: forgotten
        let live = leases.values.filter { $0 }.count
        if live != lastLiveCount {
            lastLiveCount = live
            events.append(.liveNodes(live))
        }
        return events
    }
}
