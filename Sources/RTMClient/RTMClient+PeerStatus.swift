import NIOCore
import RTMProtocol

/// Peer online status and channel member counts, the classic API's connection-centred view of
/// other users (AGORA_REFERENCE §1.5, §1.7).
extension RTMClient {
    /// The online state of up to 256 users: `online` while their session lives (a query never
    /// says `unreachable`), else `offline`. At most 10 calls per 5 s (server-configurable). One
    /// status per entry of `userIds`, in its order: a user named twice is answered twice, and
    /// both entries count toward the 256.
    ///
    /// ```swift
    /// let statuses = try await client.queryPeersOnlineStatus(["bob", "carol"])
    /// ```
    public func queryPeersOnlineStatus(_ userIds: [String]) async throws(RTMError) -> [PeerOnlineStatus] {
        try Self.checkPeers(userIds, operation: "queryPeersOnlineStatus")
        let core = self.core
        let future = core.loop.flatSubmit {
            core.request(Frame(type: .queryPeersOnlineStatus, users: userIds), operation: "queryPeersOnlineStatus")
        }
        return try await Self.wait(future, operation: "queryPeersOnlineStatus").peers ?? []
    }

    /// Watches up to 256 more users' online state (at most 512 in all; subscribing to a user
    /// twice is not an error). A `.peersOnlineStatus` event (and the delegate's
    /// `peersOnlineStatusChanged`) reports every newly watched user's state at once, then every
    /// change: `online`, `unreachable` (nothing heard from it for 6 s), `offline`. The
    /// subscriptions are restored after a reconnection, reporting what changed meanwhile, and
    /// cleared on logout.
    public func subscribePeersOnlineStatus(_ userIds: [String]) async throws(RTMError) {
        let operation = "subscribePeersOnlineStatus"
        try Self.checkPeers(userIds, operation: operation)
        let core = self.core
        let future: EventLoopFuture<Frame> = core.loop.flatSubmit {
            let total = core.peerWatch.peers.union(userIds).count
            guard total <= PeerStatusLimits.maxSubscribedPeers else {
                return core.loop.makeFailedFuture(RTMError(.peerSubscriptionOverflow, operation: operation,
                    "\(total) peers would be subscribed; the limit is \(PeerStatusLimits.maxSubscribedPeers)"))
            }
            return core.subscribePeers(userIds, operation: operation, isInternal: false)
        }
        _ = try await Self.wait(future, operation: operation)
    }

    /// Stops watching users' online state.
    public func unsubscribePeersOnlineStatus(_ userIds: [String]) async throws(RTMError) {
        let operation = "unsubscribePeersOnlineStatus"
        try Self.checkPeers(userIds, operation: operation)
        let core = self.core
        let future = core.loop.flatSubmit {
            core.peerWatch.remove(userIds)
            return core.request(Frame(type: .unsubscribePeersOnlineStatus, users: userIds), operation: operation)
        }
        _ = try await Self.wait(future, operation: operation)
    }

    /// The users whose online state this client watches (`queryPeersBySubscriptionOption`).
    public var subscribedPeers: [String] {
        get async { await onLoopValue { [core] in core.peerWatch.peers.sorted() } }
    }

    /// The visible members of up to 32 channels, without joining them (`getChannelMemberCount`,
    /// §1.5): 0 for a channel that does not exist.
    public func getChannelMemberCount(_ channels: [String]) async throws(RTMError) -> [String: Int] {
        let operation = "getChannelMemberCount"
        guard !channels.isEmpty, channels.count <= 32 else {
            throw RTMError(.invalidParameter, operation: operation, "give 1 to 32 channels, not \(channels.count)")
        }
        for channel in channels { try check(channel: channel, operation: operation) }
        let core = self.core
        let future = core.loop.flatSubmit { core.request(Frame(type: .getChannelMemberCount, channels: channels), operation: operation) }
        return try await Self.wait(future, operation: operation).memberCounts ?? [:]
    }

    static func checkPeers(_ userIds: [String], operation: String) throws(RTMError) {
        guard !userIds.isEmpty, userIds.count <= PeerStatusLimits.maxUsersPerCall else {
            throw RTMError(.invalidParameter, operation: operation,
                           "give 1 to \(PeerStatusLimits.maxUsersPerCall) users, not \(userIds.count)")
        }
        for user in userIds {
            if let problem = Limits().nameProblem(user, kind: "userId") { throw RTMError(.invalidUserId, operation: operation, problem) }
        }
    }
}
