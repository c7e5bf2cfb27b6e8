import Crypto
import Foundation
import RTMAuth
import RTMProtocol

/// What the admin API decided about who may log in: bans for a time, revoked tokens, and the
/// token each logged-in connection used (so that revoking a token ends its session). A plain
/// value; `Moderation` holds it under one lock. Times are wall-clock milliseconds.
///
/// Kept in memory: a restart forgets bans and revocations (documented in the README).
struct ModerationState {
    /// A user's ban: until when, and the reason given.
    struct Ban: Equatable, Sendable {
        let until: Int64
        let reason: String
    }

    /// The token a logged-in connection presented: its digest and issue time (seconds; nil when
    /// unreadable, e.g. an app without certificate accepting any token).
    struct SessionToken: Equatable, Sendable {
        let user: UserKey
        let digest: String
        let issuedAt: UInt32?
    }

    private(set) var bans: [UserKey: Ban] = [:]
    /// Revoked token digests → when the entry may be forgotten (the token's own expiry).
    private(set) var revokedTokens: [String: Int64] = [:]
    /// Tokens of a user issued before this time (Unix seconds) are refused.
    private(set) var revokedBefore: [UserKey: UInt32] = [:]
    /// Connection id → the token it logged in (or last renewed) with.
    private(set) var sessionTokens: [UInt64: SessionToken] = [:]

    /// Why a login (or token renewal) is refused, or nil to admit it.
    mutating func refusal(_ user: UserKey, token: SessionToken, nowMillis: Int64) -> RequestRefusal? {
        forgetExpired(nowMillis: nowMillis)
        if let ban = bans[user] {
            let seconds = (ban.until - nowMillis + 999) / 1000
            return RequestRefusal(code: .loginRejected, reason: "user '\(user.userId)' is banned for \(seconds) more s: \(ban.reason)")
        }
        if revokedTokens[token.digest] != nil {
            return RequestRefusal(code: .invalidToken, reason: "token rejected: the token was revoked")
        }
        if let before = revokedBefore[user], let issuedAt = token.issuedAt, issuedAt < before {
            return RequestRefusal(code: .invalidToken, reason: "token rejected: tokens of '\(user.userId)' issued before \(before) (Unix s) were revoked; get a new one")
        }
        return nil
    }

    /// A connection logged in (or renewed its token).
    mutating func loggedIn(connection: UInt64, token: SessionToken) {
        sessionTokens[connection] = token
    }

    /// A connection closed.
    mutating func closed(connection: UInt64) {
        sessionTokens[connection] = nil
    }

    /// Bans `user` until `until`; returns the connections to end.
    mutating func ban(_ user: UserKey, until: Int64, reason: String) -> [UInt64] {
        bans[user] = Ban(until: until, reason: reason)
        return connections(of: user)
    }

    /// Lifts a ban. Returns whether there was one.
    mutating func unban(_ user: UserKey) -> Bool {
        bans.removeValue(forKey: user) != nil
    }

    /// Active bans, soonest ending first.
    mutating func activeBans(nowMillis: Int64) -> [(UserKey, Ban)] {
        forgetExpired(nowMillis: nowMillis)
        return bans.sorted { ($0.value.until, $0.key.userId) < ($1.value.until, $1.key.userId) }
    }

    /// Revokes one token (kept refused until `until`); returns the connections using it.
    mutating func revoke(token digest: String, until: Int64) -> [UInt64] {
        revokedTokens[digest] = until
        return sessionTokens.filter { $0.value.digest == digest }.map(\.key).sorted()
    }

    /// Revokes every token of `user` issued before `before` (Unix s); returns the connections
    /// that logged in with one (all of them: their tokens were issued before now).
    mutating func revokeAll(_ user: UserKey, before: UInt32) -> [UInt64] {
        revokedBefore[user] = max(before, revokedBefore[user] ?? 0)
        return connections(of: user)
    }

    private func connections(of user: UserKey) -> [UInt64] {
        sessionTokens.filter { $0.value.user == user }.map(\.key).sorted()
    }

    private mutating func forgetExpired(nowMillis: Int64) {
        bans = bans.filter { $0.value.until > nowMillis }
        revokedTokens = revokedTokens.filter { $0.value > nowMillis }
    }

    /// The digest under which a token is remembered (SHA-256, hex): the token itself is never kept.
    static func digest(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// When a token was issued (Unix s), if it is a readable "006" or "007" token.
    static func issuedAt(_ token: String) -> UInt32? {
        if token.hasPrefix(AccessToken2.version), let contents = try? AccessToken2.parse(token) { return contents.issueTs }
        if token.hasPrefix(AccessToken006.version), let contents = try? AccessToken006.parse(token) {
            return contents.ts > AccessToken006.tokenValiditySeconds ? contents.ts - AccessToken006.tokenValiditySeconds : 0
        }
        return nil
    }

    /// When a token stops being valid anyway (ms), if readable: a revocation is kept until then.
    static func expiresAt(_ token: String) -> Int64? {
        if token.hasPrefix(AccessToken2.version), let contents = try? AccessToken2.parse(token) { return Int64(contents.expiresAt) * 1000 }
        if token.hasPrefix(AccessToken006.version), let contents = try? AccessToken006.parse(token) { return Int64(contents.ts) * 1000 }
        return nil
    }
}
