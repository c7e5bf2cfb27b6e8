import NIOCore

/// Where invitation events go and which clock decides them: the one place that tells a single
/// node from a cluster node for call invitations (§1.8). A single node applies an event where
/// it happens, on the loop's clock, and keeps every change in its `InvitationStore`; a cluster
/// node writes it to the backplane's log, every node applies it in the log's order at its
/// writer's wall clock (HubState+InvitationLog), and the log is the store.
enum InvitationRoute {
    /// Applied at once (a single node).
    case applied
    /// Written to the cluster's log.
    case logged

    /// The invitations' clock now.
    func clock(now: NIODeadline, wallMillis: Int64) -> HubState.InvitationClock {
        switch self {
        case .applied: .onLoop(now)
        case .logged: HubState.InvitationClock(table: .wall(millis: wallMillis), loop: now)
        }
    }

    /// Whether changes go to the `InvitationStore`.
    var keepsStore: Bool { self == .applied }
}

extension HubState {
    /// How this node's invitation events are decided: logged when it is one node of a cluster.
    var invitationRoute: InvitationRoute { cluster.clusterNode == nil ? .applied : .logged }
}
