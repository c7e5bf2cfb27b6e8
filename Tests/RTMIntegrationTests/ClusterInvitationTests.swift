import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// Call invitations across nodes (AGORA_REFERENCE §1.8) over a real PostgreSQL: the caller on
/// one node, the callee on another, real SDK clients; timers scaled, each test's long enough
/// that what it does before a timer on a loaded machine comes first.
extension ClusterTests {
    /// No timer fires during the test (remote offline and no response 10 s, expiry 30 s).
    static func patientInvitations(_ name: String, _ location: PostgresLocation, _ logger: Logger, _ config: inout ServerConfiguration) {
        config.invitationRemoteOfflineTimeout = .seconds(10)
        config.invitationNoResponseTimeout = .seconds(10)
        config.invitationExpiry = .seconds(30)
    }

    /// Expiry is under test (3 s); remote offline and no response (10 s) are not.
    static func expiringInvitations(_ name: String, _ location: PostgresLocation, _ logger: Logger, _ config: inout ServerConfiguration) {
        config.invitationRemoteOfflineTimeout = .seconds(10)
        config.invitationNoResponseTimeout = .seconds(10)
        config.invitationExpiry = .seconds(3)
    }

    @Test("§1.8 across nodes: alice on node A invites bob on node B: delivered, acknowledged, accepted once; the refusals are the same as on one node; a callee offline at the invite gets it when it logs in on B")
    func invitationAcrossNodes() async throws {
        let (_, a, b) = try await Self.cluster(configure: Self.patientInvitations)   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob", content: "video?", channelId: "call-1")
        #expect(sent.state == .sentToRemote)
        let received = await bobEvents.first(within: soon, where: InvitationTests.remote(sent.id, .invitationReceived))
        guard case .call(.remote(let invitation))? = received else { Issue.record("bob got no invitation"); return }
        #expect(invitation.callerId == "alice" && invitation.content == "video?" && invitation.channelId == "call-1")
        #expect(await aliceEvents.first(within: soon, where: InvitationTests.local(sent.id, .receivedByRemote)) != nil)
        try await bob.acceptRemoteInvitation(sent.id, response: "on my way")
        let accepted = await aliceEvents.first(within: soon, where: InvitationTests.local(sent.id, .acceptedByRemote))
        if case .call(.local(let local))? = accepted { #expect(local.response == "on my way") } else { Issue.record("alice was not told") }
        do {
            try await bob.acceptRemoteInvitation(sent.id)
            Issue.record("accepted twice")
        } catch { #expect(error.code == .invitationAlreadyAccept) }
        do {
            try await alice.cancelLocalInvitation(sent.id)
            Issue.record("canceled after the accept")
        } catch { #expect(error.code == .invitationAlreadyAccept) }
        #expect(await InvitationTests.states(aliceEvents, sent.id) == ["receivedByRemote", "acceptedByRemote"])

        // Not online anywhere when invited: delivered when carol logs in on B.
        let waiting = try await alice.sendLocalInvitation(calleeId: "carol")
        let (carol, carolEvents) = try await ClusterTests.client("carol", port: b.port)
        #expect(await carolEvents.first(within: soon, where: InvitationTests.remote(waiting.id, .invitationReceived)) != nil)
        #expect(await aliceEvents.first(within: soon, where: InvitationTests.local(waiting.id, .receivedByRemote)) != nil)
        try await carol.refuseRemoteInvitation(waiting.id, response: "busy")
        #expect(await aliceEvents.first(within: soon, where: InvitationTests.local(waiting.id, .refusedByRemote)) != nil)
        // Another caller's id, on the other node: alreadySent; unknown ids: notStarted.
        let dave = try await InvitationRestartTests.RawUser.login("dave", port: b.port)
        let taken = try await dave.request(#"{"type":"invite","invitationId":"\#(sent.id)","userId":"carol"}"#)
        #expect(taken.contains(#""code":-16105"#), "\(taken)")
        do {
            try await carol.acceptRemoteInvitation("no-such-id")
            Issue.record("an unknown id was accepted")
        } catch { #expect(error.code == .invitationNotStarted) }
        for client in [alice, bob, carol] { await client.logout() }
        await dave.peer.close()
    }

    @Test("§1.8 across nodes: the callee logging out on node B fails the invitation at once for the caller on A; a cancel on A reaches the callee on B; expiry fires once on both sides")
    func invitationEndsAcrossNodes() async throws {
        let (_, a, b) = try await Self.cluster(configure: Self.expiringInvitations)   // stopped by the .realTime trait's scope
        let (alice, aliceEvents) = try await ClusterTests.client("alice", port: a.port)
        let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
        let canceled = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await bobEvents.first(within: soon, where: InvitationTests.remote(canceled.id, .invitationReceived)) != nil)
        try await alice.cancelLocalInvitation(canceled.id)
        #expect(await bobEvents.first(within: soon, where: InvitationTests.remote(canceled.id, .canceled)) != nil)

        let expiring = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await aliceEvents.first(within: soon, where: InvitationTests.local(expiring.id, .receivedByRemote)) != nil)
        let expiredLocal = await aliceEvents.first(within: .seconds(15), where: InvitationTests.local(expiring.id, .failure))
        if case .call(.local(let local))? = expiredLocal { #expect(local.error == .expire) } else { Issue.record("no expiry for alice") }
        #expect(await bobEvents.first(within: soon, where: InvitationTests.remote(expiring.id, .failure)) != nil)
        #expect(await InvitationTests.states(aliceEvents, expiring.id) == ["receivedByRemote", "failure"])

        let dropped = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await aliceEvents.first(within: soon, where: InvitationTests.local(dropped.id, .receivedByRemote)) != nil)
        let start = ContinuousClock.now
        await bob.logout()
        let failed = await aliceEvents.first(within: soon, where: InvitationTests.local(dropped.id, .failure))
        if case .call(.local(let local))? = failed { #expect(local.error == .remoteOffline) } else { Issue.record("alice was not told") }
        // At once: not the 10 s remote-offline timer (whose failure has the same error), nor the
        // 3 s expiry (another error).
        #expect(ContinuousClock.now - start < .seconds(8))
        await alice.logout()
    }

    @Test("§1.8/T-12 across a restart of the whole cluster: the invitations are read back from the log: the callee's catch-up and the caller's resend are answered with where they stand, an accepted one does not ring again, and expiry still counts from the first invite")
    func invitationsSurviveClusterRestart() async throws {
        let (database, location, logger) = try await Self.database()
        defer { database.destroy() }
        func node(_ name: String) async throws -> Harness {
            try await Harness.start {
                $0.backplane = PostgresChannelBackplane(location: location, node: name, options: Self.options(), logger: logger)
                $0.invitationExpiry = .seconds(8)
            }
        }
        var a = try await node("a")
        var b = try await node("b")
        let alice = try await InvitationRestartTests.RawUser.login("alice", port: a.port)
        let bob = try await InvitationRestartTests.RawUser.login("bob", port: b.port)
        let sentAt = ContinuousClock.now
        let ringing = try await alice.request(#"{"type":"invite","invitationId":"ringing","userId":"bob","text":"video?"}"#)
        #expect(ringing.contains(#""event":"sentToRemote""#), "\(ringing)")
        _ = try await alice.request(#"{"type":"invite","invitationId":"answered","userId":"bob"}"#)
        #expect(try await bob.request(#"{"type":"ackInvitation","invitationId":"ringing"}"#).contains(#""type":"ok""#))
        let accepted = try await bob.request(#"{"type":"acceptInvitation","invitationId":"answered","text":"on my way"}"#)
        #expect(accepted.contains(#""event":"accepted""#), "\(accepted)")

        await a.stop()
        await b.stop()
        await alice.peer.close()
        await bob.peer.close()
        a = try await node("a")
        b = try await node("b")
        // bob, on the other node now: his catch-up works without the caller's resend.
        let bobBack = try await InvitationRestartTests.RawUser.login("bob", port: a.port)
        let redelivered = await bobBack.frame(within: soon) { $0.contains(#""type":"remoteInvitation""#) && $0.contains("ringing") }
        #expect(redelivered?.contains(#""event":"invitationReceived""#) == true)
        let ack = try await bobBack.request(#"{"type":"ackInvitation","invitationId":"ringing"}"#)
        #expect(ack.contains(#""event":"invitationReceived""#) && ack.contains(#""text":"video?""#), "\(ack)")
        // alice comes back on B within her window and resends both.
        let aliceBack = try await InvitationRestartTests.RawUser.login("alice", port: b.port)
        let resent = try await aliceBack.request(#"{"type":"invite","invitationId":"ringing","userId":"bob","text":"video?"}"#)
        #expect(resent.contains(#""event":"receivedByRemote""#), "\(resent)")
        let late = try await aliceBack.request(#"{"type":"invite","invitationId":"answered","userId":"bob"}"#)
        #expect(late.contains(#""event":"acceptedByRemote""#) && late.contains(#""text":"on my way""#), "\(late)")
        // Expiry from the first invite (8 s), on both sides, told by each one's node (bob pings
        // meanwhile: silent past his heartbeat, his connection would be closed).
        async let bobFailure = bobBack.frame(within: .seconds(12)) { $0.contains(#""event":"failure""#) && $0.contains("ringing") }
        let expired = await aliceBack.frame(within: .seconds(12)) { $0.contains(#""type":"localInvitation""#) && $0.contains(#""event":"failure""#) }
        let expiredAfter = ContinuousClock.now - sentAt
        #expect(expired?.contains(#""code":3"#) == true, "\(aliceBack.peer.frames().map(\.text))")
        #expect(expiredAfter >= .seconds(8) && expiredAfter < .seconds(11), "expired \(expiredAfter) after the first invite")
        #expect(await bobFailure != nil, "\(bobBack.peer.frames().map(\.text))")
        #expect(!bobBack.peer.frames().map(\.text).contains { $0.contains("answered") && $0.contains(#""type":"remoteInvitation""#) })
        await aliceBack.peer.close()
        await bobBack.peer.close()
        await a.stop()
        await b.stop()
    }
}
