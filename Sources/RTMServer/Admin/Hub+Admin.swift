import Foundation
import NIOCore
import RTMProtocol

/// What the admin API does to the hub: reads of its state, publishes as a backend, and the
/// ends of sessions an administrator decides (disconnect, kick, ban, revoke).
extension Hub {
    func channelSummaries(appId: String?) -> [AdminModels.ChannelItem] {
        state.withLockedValue { $0.channelSummaries(appId: appId) }
    }

    func channelDetail(_ key: ChannelKey) -> (members: [AdminModels.Member], visible: Int, lastSeq: UInt64, recent: [HubState.RecentMessage])? {
        state.withLockedValue { $0.channelDetail(key) }
    }

    func sessionSummaries(appId: String?) -> [AdminModels.Session] {
        state.withLockedValue { $0.sessionSummaries(appId: appId) }
    }

    /// Channel messages published since start.
    var publishedMessages: UInt64 { state.withLockedValue { $0.publishedMessages } }

    /// Channels the server knows (with members, subscribers or recent messages).
    var channelCount: Int { state.withLockedValue { $0.channels.count } }

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
        let now = Self.wallMillis
        let (ended, locks) = state.withLockedValue { state in
            let locks = state.releaseLocks(of: key, wallMillis: now)
            return (state.endSessionByAdmin(key, wallMillis: now), locks)
        }
        perform(ended.broadcasts)
        perform(locks)
        clusterSender?.wake()
        if let connection = ended.connection {
            Self.close(connection, with: Frame(type: .kicked, code: code.rawValue, reason: reason), code: .normalClosure, reason: reason)
        }
        closeStreams(of: key, reason: reason)
        if ended.existed { logger.info("admin: session ended", metadata: ["user": "\(key.userId)", "code": "\(code)", "reason": "\(reason)"]) }
        return ended.existed
    }

    /// Ends the sessions served by these connections (a revoked token's).
    func endSessions(connections ids: [UInt64], code: LinkStateChangeReason, reason: String) -> Int {
        let keys = state.withLockedValue { state in ids.compactMap { state.sessionByConnection[$0] } }
        return keys.filter { endSession($0, code: code, reason: reason) }.count
    }
}
