import Foundation
import RTMAuth
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Token lifecycle end to end (SPEC C-7, AGORA_REFERENCE §2.13). Token expiries are whole
/// seconds of wall-clock time, so these tests use tokens valid for 2–3 s and a warning lead
/// shrunk to match.
@Suite(.realTime, .serialized)
struct TokenTests {
    static let willExpire: @Sendable (RTMEvent) -> Bool = { if case .tokenWillExpire(nil) = $0 { true } else { false } }

    static func token(_ user: String, expiresAt: UInt32) -> String {
        AccessToken006.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: user,
                                     privilegeExpireTimestamp: expiresAt)
    }

    static var nowSeconds: UInt32 { UInt32(Date().timeIntervalSince1970) }

    @Test("§2.13: tokenWillExpire fires the lead time before expiry; renewToken keeps the session past the old expiry")
    func willExpireThenRenew() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, configure: { $0.tokenWillExpireLead = 1.5 }, login: false)
        let expiry = Self.nowSeconds + 3
        try await alice.login(token: Self.token("alice", expiresAt: expiry))
        let warned = await events.first(within: soon, where: Self.willExpire)
        #expect(warned != nil)
        // The warning came before the expiry, about the lead time ahead of it.
        let margin = Date(timeIntervalSince1970: Double(expiry)).timeIntervalSinceNow
        #expect(margin > 0.5 && margin <= 1.6)
        try await alice.renewToken(Harness.token("alice"))
        // Past the old expiry the session is still there: no kick, no link change.
        #expect(await events.next(within: .seconds(2)) { $0.link != nil } == nil)
        #expect(await alice.linkState == .connected)
        #expect(try await alice.publish(channel: "room", message: "still here") > 0)
        await alice.logout()
    }

    @Test("§2.13: a token not renewed ends the session at expiry: failed / serverReject / tokenExpired, classic aborted")
    func expiryEndsSession() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, configure: { $0.tokenWillExpireLead = 1 }, login: false)
        try await alice.login(token: Self.token("alice", expiresAt: Self.nowSeconds + 2))
        let failed = await events.first(within: soon) { $0.link?.currentState == .failed }?.link
        #expect(failed?.operation == .serverReject)
        #expect(failed?.reasonCode == .tokenExpired)
        #expect(await events.first(within: soon) { $0.classic == .aborted } != nil)
        #expect(await events.first(within: .zero, where: Self.willExpire) != nil)   // warned first
        await alice.logout()
    }

    @Test("§2.13: a stream channel's own token: warned with the channel name, then the STREAM connection ends (failed/tokenExpired) while the MESSAGE session goes on")
    func streamTokenExpiry() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, configure: { $0.tokenWillExpireLead = 1 })
        let game = try alice.createStreamChannel("game")
        try await game.join(JoinChannelOptions(token: Self.token("alice", expiresAt: Self.nowSeconds + 2)))
        #expect(await events.first(within: soon) { if case .tokenWillExpire("game") = $0 { true } else { false } } != nil)
        let failed = await events.first(within: soon) { ($0.link.map { $0.serviceType == .stream && $0.currentState == .failed }) ?? false }?.link
        #expect(failed?.reasonCode == .tokenExpired)
        #expect(failed?.operation == .serverReject)
        #expect(await alice.linkState == .connected)
        #expect(await StreamTests.eventually { harness.server.connectionCounters.stream == 0 })
        await alice.logout()
    }

    @Test("C-7: the token expires during a reconnection: tokenExpired event, no classic change; after renewToken reconnection goes on")
    func expiryWhileReconnecting() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, events) = try await Harness.client("alice", port: proxy.port, login: false)
        let expiry = Self.nowSeconds + 2
        try await alice.login(token: Self.token("alice", expiresAt: expiry))
        proxy.setRefuseNew(true)
        proxy.cutAll()
        #expect(await events.first(within: soon) { $0.classic == .reconnecting } != nil)
        // Let the reconnection reach the server only once the token has expired (the wall
        // clock passing its expiry is the rule under test; a negative wait returns at once).
        try await Task.sleep(until: .now + .seconds(Double(expiry) - Date().timeIntervalSince1970 + 0.2), clock: .continuous)   // the token's expiry passing is the rule
        await events.clear()
        proxy.setRefuseNew(false)
        #expect(await events.first(within: soon) { if case .tokenExpired = $0 { true } else { false } } != nil)
        #expect(await events.matching { $0.classic != nil }.isEmpty)   // still reconnecting (C-7)
        #expect(await alice.connectionState == .reconnecting)
        try await alice.renewToken(Harness.token("alice"))
        #expect(await events.first(within: soon) { $0.classic == .connected } != nil)
        #expect(await alice.linkState == .connected)
        await alice.logout()
        try? await proxy.stop()
    }

    @Test("§2.13: AccessToken2 (\"007\") tokens log in, renew and are checked like \"006\" ones")
    func accessToken2() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, login: false)
        let token = AccessToken2.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: "alice", expire: 3600)
        #expect(token.hasPrefix("007"))
        try await alice.login(token: token)
        #expect(await events.first(within: soon) { $0.classic == .connected } != nil)
        try await alice.renewToken(AccessToken2.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: "alice", expire: 7200))
        do {
            try await alice.renewToken(AccessToken2.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: "mallory", expire: 7200))
            Issue.record("a token for another user was accepted")
        } catch {
            #expect(error.code == .invalidToken)
        }
        await alice.logout()
    }
}
