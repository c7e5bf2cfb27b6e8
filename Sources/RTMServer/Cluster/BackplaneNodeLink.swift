import NIOCore

/// A cluster node's log of session events: the backplane. This node's events are committed
/// by one sender (`ClusterSender`) in the order they happened, and every node, this one
/// included, applies them as the backplane delivers them (`Hub.handle`). Channels are
/// delivered here only once followed.
final class BackplaneNodeLink: NodeLink {
    private let backplane: any ChannelBackplane
    private let sender = ClusterSender(retryInterval: .milliseconds(200))

    init(backplane: any ChannelBackplane) {
        self.backplane = backplane
    }

    func start(hub: Hub) async throws {
        try await backplane.start { event in
            hub.handle(event)
            // The node joins again when this returns: not before its earlier connections' commits ended.
            if case .fenced = event { await hub.cluster.fenced() }
        }
        hub.startClusterSender(sender, backplane: backplane)
        hub.streams.announceStart()
    }

    func endTransaction(_ state: inout HubState, actions: inout [HubAction]) {}

    func wake(hub: Hub) { sender.wake() }

    func follow(_ follows: [BackplaneFollow], hub: Hub) {
        let backplane = self.backplane
        Task {
            do {
                try await backplane.follow(follows)
            } catch {
                hub.logger.warning("could not start following channels: their position could not be read from the cluster's database",
                                   metadata: ["channels": "\(follows.count)", "error": "\(error)"])
                let now = NIODeadline.now()
                hub.modify { $0.followFailed(follows, now: now) }
            }
        }
    }

    func unfollow(_ follows: [BackplaneFollow]) { backplane.unfollow(follows) }

    /// A cluster's log is its invitations' store (`InvitationRoute.logged`): the invitation
    /// channel's recent history is what every invitation still open or remembered was made of.
    func restoreInvitations(hub: Hub) async throws {
        let configuration = hub.configuration
        let longest = [configuration.invitationRemoteOfflineTimeout, configuration.invitationNoResponseTimeout,
                       configuration.invitationExpiry].max() ?? .zero
        // An invitation lives at most `longest` after its invite and is remembered for
        // `invitationExpiry` after it ends; a minute more for the nodes' clocks.
        let horizon = longest + configuration.invitationExpiry + .seconds(60)
        let messages = try await backplane.controlHistory(channel: InvitationEvent.channel,
                                                          sinceMillis: Hub.wallMillis - horizon.nanoseconds / 1_000_000)
        let history = hub.decodeClusterEvents(messages)
        let now = NIODeadline.now()
        hub.modify { $0.replayInvitations(history, now: now, wallMillis: Hub.wallMillis) }
    }

    func stop() async { await sender.stop() }
}
