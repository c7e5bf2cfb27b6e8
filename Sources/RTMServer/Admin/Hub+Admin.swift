import Foundation
import NIOCore
import RTMAdminAPI
import RTMProtocol

/// What the admin API does to the hub: reads of its state, publishes as a backend, and the
/// ends of sessions an administrator decides (disconnect, kick, ban, revoke).
extension Hub {
    func channelSummaries(appId: String?, page: AdminPage) -> Operations.listChannels.Output.Ok.Body.jsonPayload {
        read { $0.channelSummaries(appId: appId, page: page) }
    }

    /// Cluster mode: the nodes this one knows, with their sessions (nil on a single node).
    func clusterNodes() -> Components.Schemas.Info.clusterPayload.nodesPayload? {
        read { $0.clusterNodes() }
    }

    func channelDetail(_ key: ChannelKey) -> (members: Components.Schemas.Channel.membersPayload, visible: Int, lastSeq: UInt64, recent: [HubState.RecentMessage])? {
        read { $0.channelDetail(key) }
    }

    /// One page of sessions, each online one with its connection's figures (read on the
    /// connection's loop, one hop per loop). The future completes on `loop`.
    func sessionSummaries(appId: String?, page: AdminPage, node: String, on loop: any EventLoop) -> EventLoopFuture<Operations.listSessions.Output.Ok.Body.jsonPayload> {
        let (summaries, connections) = read { $0.sessionSummaries(appId: appId, page: page) }
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, items: [(index: Int, connection: ConnectionRef)])] = [:]
        for (index, connection) in connections.enumerated() {
            guard let connection else { continue }
            let eventLoop = connection.channel.eventLoop
            byLoop[ObjectIdentifier(eventLoop), default: (eventLoop, [])].items.append((index, connection))
        }
        let fanouts = self.fanouts
        let reads = byLoop.values.map { group in
            group.loop.submit { group.items.map { ($0.index, $0.connection.inspect(node: node, fanout: fanouts[$0.connection.loopIndex])) } }
        }
        return EventLoopFuture.whenAllSucceed(reads, on: loop).map { groups in
            var summaries = summaries
            for (index, inspected) in groups.joined() { summaries.sessions[index].connection = inspected }
            return summaries
        }
    }

    /// New namespaces and default capability: for new sessions, for the channels created from
    /// now on (their replay limits), and for every open connection (on its loop, one hop per loop). The future
    /// completes once every open connection has them.
    func reloadAccessRules(_ rules: AccessRules.Rules) -> EventLoopFuture<Void> {
        accessRules.replace(rules)
        modify { ($0.reload(namespaces: rules.namespaces), []) }
        let byLoop = Dictionary(grouping: openConnections, by: \.loopIndex)
        let done = byLoop.map { index, connections in
            fanouts[index].eventLoop.submit { for connection in connections { connection.onLoop { $0.accessRulesChanged() } } }
        }
        return EventLoopFuture.andAllComplete(done, on: fanouts[0].eventLoop)
    }

    /// New per-connection rates: for connections opened from now on, and for every open one
    /// (new buckets, full). The future completes once every open connection has them.
    func reloadLimits(_ limits: ConnectionLimits) -> EventLoopFuture<Void> {
        let rates = ConnectionRates(limits)   // one refusal for every connection
        modify { ($0.reload(connectionRates: rates), []) }
        let byLoop = Dictionary(grouping: openConnections, by: \.loopIndex)
        let done = byLoop.map { index, connections in
            fanouts[index].eventLoop.submit {
                for connection in connections {
                    connection.onLoop { handler in
                        handler.lifecycle.reload(rates, now: .now())
                    }
                }
            }
        }
        return EventLoopFuture.andAllComplete(done, on: fanouts[0].eventLoop)
    }

    /// Channel messages published since start.
    var publishedMessages: UInt64 { read { $0.publishedCount } }

    /// Channels the server knows (with members, subscribers or recent messages).
    var channelCount: Int { read { $0.channelCount } }

    /// Disconnects a user's MESSAGE connection without ending its session: a `goaway` frame
    /// (code 28 kickedOutByServer, `reason`), then close 1001. The SDK reconnects by itself and
    /// resumes the session within its grace window (P-1: members see nothing). False when the
    /// user has no connection.
    func disconnect(_ key: UserKey, reason: String) -> Bool {
        guard let connection = connection(of: key) else { return false }
        logger.info("admin: disconnecting", metadata: ["user": "\(key.userId)", "reason": "\(reason)"])
        Self.close(connection, with: Frame(type: .goAway, code: LinkStateChangeReason.kickedOutByServer.rawValue, reason: reason),
                   code: .goingAway, reason: reason)
        return true
    }

    /// Ends a user's session (online or within its grace window) as a logout would: members see
    /// it leave (P-4), its locks are released, its STREAM connections close (K-4), and its
    /// MESSAGE connection gets `kicked` with `code` and `reason`, then close 1000. The SDK goes
    /// to failed / aborted and never logs in again by itself (C-6). False when there was no
    /// session.
    func endSession(_ key: UserKey, code: LinkStateChangeReason, reason: String) -> Bool {
        let now = NIODeadline.now()
        return modify { state in
            guard let actions = state.onEndSessionByAdmin(key, code: code, reason: reason, now: now, wallMillis: Self.wallMillis) else {
                return (false, [])
            }
            return (true, actions)
        }
    }

    /// Ends the sessions served by these connections (a revoked token's).
    func endSessions(connections ids: [UInt64], code: LinkStateChangeReason, reason: String) -> Int {
        let keys = read { $0.users(ofConnections: ids) }
        return keys.filter { endSession($0, code: code, reason: reason) }.count
    }
}
