import NIOCore

/// How a node reaches the log it shares with the other nodes: its session and presence events
/// (`ClusterReplica.outbox`) go to it and come back from it in the log's one order, and it
/// delivers the channels the node asks for (`ChannelInterest`). The one seam between one node
/// and a cluster for sessions: a single node's log is in memory (`LocalNodeLink`: its events
/// come straight back, there is no other node, and every channel is delivered); a cluster
/// node's is the backplane (`BackplaneNodeLink`). The hub never asks which one it has.
protocol NodeLink: Sendable {
    /// Starts delivering the log to `hub` (before the node serves).
    func start(hub: Hub) async throws
    /// At the end of each event's transaction, under the hub's lock: a log that can take the
    /// events the transaction queued in the same transaction does (one node's, in memory),
    /// appending what applying them asks for to `actions`.
    func endTransaction(_ state: inout HubState, actions: inout [HubAction])
    /// Something may be in the hub's outbox of session events (after the lock is released).
    func wake(hub: Hub)
    /// Asks the log to deliver these channels here (`HubAction.follow`); the hub learns where
    /// each stands (`Hub.followStarted`) or that it could not be started (`followFailed`).
    func follow(_ follows: [BackplaneFollow], hub: Hub)
    /// Brings back the invitations of the last run, before connections are accepted (§1.8).
    func restoreInvitations(hub: Hub) async throws
    /// Stops delivering these channels here (`HubAction.unfollow`).
    func unfollow(_ follows: [BackplaneFollow])
    /// Sends what is left and stops.
    func stop() async
}

/// A single node's log of session events, in memory: what an event of the hub queued is
/// applied back in the order it was queued, in the same transaction (as the channel pipeline's
/// in-memory log numbers a run in the transaction that applies it), as a cluster node applies
/// its own events read back from the backplane. So a new login is confirmed by its own
/// `started` before its transaction ends, and its reply never waits. Every channel is this
/// node's: nothing is followed.
struct LocalNodeLink: NodeLink {
    func start(hub: Hub) async throws {}

    func endTransaction(_ state: inout HubState, actions: inout [HubAction]) {
        guard state.cluster.hasOutbox else { return }
        actions += state.applyOwnClusterEvents(now: .now(), wallMillis: Hub.wallMillis)
    }

    func wake(hub: Hub) {}

    func follow(_ follows: [BackplaneFollow], hub: Hub) {}

    /// One node keeps its invitations in its own store (`InvitationRoute.applied`).
    func restoreInvitations(hub: Hub) async throws {
        let records = try hub.invitationWriter.loadAll()
        let now = NIODeadline.now(), wallMillis = Hub.wallMillis
        hub.modify { $0.restoreInvitations(records, now: now, wallMillis: wallMillis) }
    }
    func unfollow(_ follows: [BackplaneFollow]) {}
    func stop() async {}
}
