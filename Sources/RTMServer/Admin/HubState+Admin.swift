import Foundation
import NIOCore
import RTMAdminAPI
import RTMProtocol

/// What the admin API reads from the hub's state (under the hub's lock), as plain values.
extension HubState {
    /// One page of the channels of `appId` (every app when nil), by app id and name, with
    /// how many there are and the next page's cursor.
    func channelSummaries(appId: String?, page: AdminPage) -> Operations.listChannels.Output.Ok.Body.jsonPayload {
        let keys = channels.keys.lazy.filter { appId == nil || $0.appId == appId }.map { AdminPageKey(appId: $0.appId, name: $0.name) }
        let (picked, next) = page.cut(keys)
        let items = picked.compactMap { key -> Components.Schemas.ChannelItem? in
            guard let state = channels[ChannelKey(appId: key.appId, name: key.name)] else { return nil }
            return Components.Schemas.ChannelItem(appId: key.appId, name: key.name, members: state.members.count,
                                                  visibleMembers: state.visible, lastSeq: Int(state.seq))
        }
        return .init(channels: items, total: keys.count, nextPage: next)
    }

    /// A channel's members (with their temporary state) and its last messages (the replay
    /// buffer, M-2: at most `channelReplayMax`, from the last `channelReplayWindow`). Nil when
    /// the server does not know the channel.
    func channelDetail(_ key: ChannelKey) -> (members: Components.Schemas.Channel.membersPayload, visible: Int, lastSeq: UInt64, recent: [RecentMessage])? {
        guard let state = channels[key] else { return nil }
        let members = state.members.map { Components.Schemas.Channel.membersPayloadPayload(userId: $0.key, quiet: $0.value.quiet, state: .init(additionalProperties: $0.value.state)) }
            .sorted { $0.userId < $1.userId }
        return (members, state.visible, state.seq, Array(state.recent))
    }

    /// One page of the sessions of `appId` (every app when nil), by app id and user id, with
    /// how many there are and the next page's cursor; and each one's MESSAGE connection (nil:
    /// offline), to be inspected on its loop.
    func sessionSummaries(appId: String?, page: AdminPage) -> (Operations.listSessions.Output.Ok.Body.jsonPayload, [ConnectionRef?]) {
        // In a cluster, the other nodes' sessions too (the replica every node keeps).
        let all = sessions.keys.lazy.map { $0 } + cluster.remote.keys.lazy.filter { sessions[$0] == nil }
        let keys = all.lazy.filter { appId == nil || $0.appId == appId }.map { AdminPageKey(appId: $0.appId, name: $0.userId) }
        let (picked, next) = page.cut(keys)
        let me = cluster.clusterNode
        let items = picked.compactMap { key -> Components.Schemas.Session? in
            let user = UserKey(appId: key.appId, userId: key.name)
            if let session = sessions[user] {
                return Components.Schemas.Session(appId: key.appId, userId: key.name, online: session.connection != nil,
                                                  channels: session.channels.sorted(), node: me)
            }
            guard let remote = cluster.remote[user] else { return nil }
            // Another node's: online unless that node is gone (then it is in its grace window here).
            return Components.Schemas.Session(appId: key.appId, userId: key.name, online: !cluster.isGone(remote.owner),
                                              channels: remote.session.members.keys.sorted(), node: String(ClusterEvent.node(of: remote.owner)))
        }
        let connections = items.map { sessions[UserKey(appId: $0.appId, userId: $0.userId)]?.connection }
        return (.init(sessions: items, total: keys.count, nextPage: next), connections)
    }

    /// Cluster mode: the nodes this one knows (itself, and every node it has heard from
    /// through the log), each with its sessions; nil on a single node.
    func clusterNodes() -> Components.Schemas.Info.clusterPayload.nodesPayload? {
        guard let myNode = cluster.clusterNode else { return nil }
        var held: [String: Int] = [:]
        for remote in cluster.remote.values { held[remote.owner, default: 0] += 1 }
        var nodes = [Components.Schemas.Info.clusterPayload.nodesPayloadPayload(node: myNode, instance: cluster.instance, state: .this,
                                                                                sessions: sessions.count)]
        for (node, instance) in cluster.instances.sorted(by: { $0.key < $1.key }) where node != myNode {
            nodes.append(.init(node: node, instance: instance, state: cluster.isGone(instance) ? .dead : .alive, sessions: held[instance] ?? 0))
        }
        return nodes
    }

    /// The administrator ends a user's session (kick, ban, revoke): members see it leave (P-4),
    /// its locks are released, its MESSAGE connection gets `kicked` with `code` and `reason`,
    /// its STREAM connections close (K-4), it is offline to peers at once (§1.7) and its
    /// calls end (§1.8); webhooks: leave and `userOffline` with reason `kicked`. Nil when the
    /// user had no session.
    mutating func onEndSessionByAdmin(_ key: UserKey, code: LinkStateChangeReason, reason: String, now: NIODeadline,
                                      wallMillis: Int64) -> [HubAction]? {
        guard let ended = endSessionForGood(key, reason: "kicked", now: now, wallMillis: wallMillis) else { return nil }
        var actions = ended.actions
        if let connection = ended.connection { actions.append(.kick(connection, user: key, code: code, reason: reason)) }
        actions.append(.closeStreams(key, reason: reason))
        actions.append(.log(.info, "admin: session ended", ["user": "\(key.userId)", "code": "\(code)", "reason": "\(reason)"]))
        return actions
    }
}
