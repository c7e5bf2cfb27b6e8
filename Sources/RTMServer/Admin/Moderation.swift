import NIOConcurrencyHelpers
import RTMProtocol

/// The one owner of `ModerationState` (bans, revoked tokens, the token of each logged-in
/// connection), behind one lock. The connection handlers ask it before admitting a login or a
/// token renewal; the admin API changes it.
final class Moderation: Sendable {
    private let state = NIOLockedValueBox(ModerationState())

    /// Why `token` may not log `user` in (or renew), or nil; on nil the connection is recorded
    /// as using the token.
    func admit(_ user: UserKey, token: String?, connection: UInt64) -> RequestRefusal? {
        let token = token ?? ""
        let session = ModerationState.SessionToken(user: user, digest: ModerationState.digest(token),
                                                   issuedAt: ModerationState.issuedAt(token))
        let now = Hub.wallMillis
        return state.withLockedValue { state in
            if let refusal = state.refusal(user, token: session, nowMillis: now) { return refusal }
            state.loggedIn(connection: connection, token: session)
            return nil
        }
    }

    /// A connection closed: its token is forgotten.
    func closed(connection: UInt64) {
        state.withLockedValue { $0.closed(connection: connection) }
    }

    /// Runs `body` on the state under the lock.
    func withState<T>(_ body: (inout ModerationState) -> T) -> T {
        state.withLockedValue(body)
    }
}
