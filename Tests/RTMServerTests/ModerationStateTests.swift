import Foundation
import RTMAuth
import RTMProtocol
import Testing
@testable import RTMServer

/// The admin API's moderation rules as a pure value, and its key comparison.
@Suite("Moderation state")
struct ModerationStateTests {
    let alice = UserKey(appId: "app", userId: "alice")
    let bob = UserKey(appId: "app", userId: "bob")

    func token(_ user: UserKey, digest: String = "d1", issuedAt: UInt32? = 1_000) -> ModerationState.SessionToken {
        ModerationState.SessionToken(user: user, digest: digest, issuedAt: issuedAt)
    }

    @Test("a ban refuses logins (-10012) until it ends, and names the time left and the reason")
    func banUntilItEnds() {
        var state = ModerationState()
        state.loggedIn(connection: 7, token: token(alice))
        let ended = state.ban(alice, until: 10_000, reason: "spam")
        #expect(ended == [7])
        let refusal = state.refusal(alice, token: token(alice), nowMillis: 8_500)
        #expect(refusal?.code == .loginRejected)
        #expect(refusal?.reason == "user 'alice' is banned for 2 more s: spam")
        let other = state.refusal(bob, token: token(bob), nowMillis: 8_500)
        #expect(other == nil)
        let after = state.refusal(alice, token: token(alice), nowMillis: 10_000)
        #expect(after == nil)
        #expect(state.bans.isEmpty)   // forgotten once over
    }

    @Test("unban lifts a ban at once")
    func unban() {
        var state = ModerationState()
        _ = state.ban(alice, until: 10_000, reason: "x")
        let first = state.unban(alice), second = state.unban(alice)
        #expect(first && !second)
        let refusal = state.refusal(alice, token: token(alice), nowMillis: 1)
        #expect(refusal == nil)
    }

    @Test("a revoked token is refused (-10005) until its own expiry; the connections using it are named")
    func revokeOneToken() {
        var state = ModerationState()
        state.loggedIn(connection: 1, token: token(alice, digest: "a"))
        state.loggedIn(connection: 2, token: token(bob, digest: "b"))
        let using = state.revoke(token: "a", until: 5_000)
        #expect(using == [1])
        let revoked = state.refusal(alice, token: token(alice, digest: "a"), nowMillis: 4_999)
        #expect(revoked?.code == .invalidToken)
        let other = state.refusal(alice, token: token(alice, digest: "c"), nowMillis: 4_999)
        #expect(other == nil)
        let expired = state.refusal(alice, token: token(alice, digest: "a"), nowMillis: 5_000)
        #expect(expired == nil)
        state.closed(connection: 1)
        let none = state.revoke(token: "a", until: 9_000)
        #expect(none.isEmpty)
    }

    @Test("revoking a user refuses its tokens issued before the revocation, not later ones or unreadable ones")
    func revokeUser() {
        var state = ModerationState()
        state.loggedIn(connection: 3, token: token(alice))
        let ended = state.revokeAll(alice, before: 2_000)
        #expect(ended == [3])
        let older = state.refusal(alice, token: token(alice, issuedAt: 1_999), nowMillis: 0)
        #expect(older?.code == .invalidToken)
        let same = state.refusal(alice, token: token(alice, issuedAt: 2_000), nowMillis: 0)
        #expect(same == nil)
        let unreadable = state.refusal(alice, token: token(alice, issuedAt: nil), nowMillis: 0)
        #expect(unreadable == nil)
        let otherUser = state.refusal(bob, token: token(bob, issuedAt: 1), nowMillis: 0)
        #expect(otherUser == nil)
        // An older revocation never moves the bar back.
        _ = state.revokeAll(alice, before: 1_000)
        let stillRefused = state.refusal(alice, token: token(alice, issuedAt: 1_500), nowMillis: 0)
        #expect(stillRefused != nil)
    }

    @Test("token issue times are read from 006 and 007 tokens")
    func issueTimes() {
        let t007 = AccessToken2.buildRTMToken(appId: "0123456789abcdef0123456789abcdef", appCertificate: "fedcba9876543210fedcba9876543210",
                                              userId: "alice", expire: 600, issueTs: 1_700_000_000)
        #expect(ModerationState.issuedAt(t007) == 1_700_000_000)
        #expect(ModerationState.expiresAt(t007) == 1_700_000_600_000)
        #expect(ModerationState.issuedAt("not a token") == nil)
        #expect(ModerationState.digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("admin keys: equal only when whole and equal (a prefix, a longer key, one changed byte all fail)")
    func keyComparison() {
        #expect(AdminAPI.keysMatch("secret-key", "secret-key"))
        #expect(!AdminAPI.keysMatch("secret-ke", "secret-key"))
        #expect(!AdminAPI.keysMatch("secret-keyy", "secret-key"))
        #expect(!AdminAPI.keysMatch("secret-kez", "secret-key"))
        #expect(!AdminAPI.keysMatch("", "secret-key"))
    }
}
