import Foundation
import NIOCore
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Call invitations end to end (AGORA_REFERENCE §1.8), with real sockets and the fault proxy.
/// Timers scaled: remote offline and no response at 1 s (30 s), expiry at 2 s (60 s).
@Suite(.realTime, .serialized)
struct InvitationTests {
    static func start() async throws -> Harness {
        try await Harness.start { config in
            config.invitationRemoteOfflineTimeout = .seconds(1)
            config.invitationNoResponseTimeout = .seconds(1)
            config.invitationExpiry = .seconds(2)
        }
    }

    static func local(_ id: String, _ state: LocalInvitationState) -> @Sendable (RTMEvent) -> Bool {
        { if case .call(.local(let i)) = $0 { i.id == id && i.state == state } else { false } }
    }

    static func remote(_ id: String, _ state: RemoteInvitationState) -> @Sendable (RTMEvent) -> Bool {
        { if case .call(.remote(let i)) = $0 { i.id == id && i.state == state } else { false } }
    }

    /// The states reported for invitation `id`, in order.
    static func states(_ recorder: AsyncRecorder<RTMEvent>, _ id: String) async -> [String] {
        await recorder.all.compactMap { event -> String? in
            switch event {
            case .call(.local(let i)) where i.id == id: i.state.name
            case .call(.remote(let i)) where i.id == id: i.state.name
            default: nil
            }
        }
    }

    @Test("§1.8: invite → received by the callee → accepted with a response; never accepted twice; every state reported once")
    func inviteAndAccept() async throws {
        let harness = try await Self.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob", content: "video?", channelId: "call-1")
        #expect(sent.state == .sentToRemote)
        let received = await bobEvents.first(within: soon, where: Self.remote(sent.id, .invitationReceived))
        guard case .call(.remote(let invitation))? = received else { Issue.record("bob got no invitation"); return }
        #expect(invitation.callerId == "alice")
        #expect(invitation.content == "video?")
        #expect(invitation.channelId == "call-1")
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .receivedByRemote)) != nil)

        try await bob.acceptRemoteInvitation(sent.id, response: "on my way")
        let accepted = await aliceEvents.first(within: soon, where: Self.local(sent.id, .acceptedByRemote))
        if case .call(.local(let local))? = accepted { #expect(local.response == "on my way") } else { Issue.record("alice was not told") }
        do {
            try await bob.acceptRemoteInvitation(sent.id)
            Issue.record("accepted twice")
        } catch { #expect(error.code == .invitationAlreadyAccept) }
        do {
            try await alice.cancelLocalInvitation(sent.id)
            Issue.record("canceled after the accept")
        } catch { #expect(error.code == .invitationAlreadyAccept) }
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .accepted)) != nil)
        #expect(await Self.states(aliceEvents, sent.id) == ["receivedByRemote", "acceptedByRemote"])
        #expect(await Self.states(bobEvents, sent.id) == ["invitationReceived", "accepted"])
        await alice.logout()
        await bob.logout()
    }

    @Test("§1.8: refused with a response; canceled (the callee told); unknown ids are notStarted")
    func refuseAndCancel() async throws {
        let harness = try await Self.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let first = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await bobEvents.first(within: soon, where: Self.remote(first.id, .invitationReceived)) != nil)
        try await bob.refuseRemoteInvitation(first.id, response: "busy")
        let refused = await aliceEvents.first(within: soon, where: Self.local(first.id, .refusedByRemote))
        if case .call(.local(let local))? = refused { #expect(local.response == "busy") } else { Issue.record("alice was not told") }

        let second = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await bobEvents.first(within: soon, where: Self.remote(second.id, .invitationReceived)) != nil)
        try await alice.cancelLocalInvitation(second.id)
        #expect(await bobEvents.first(within: soon, where: Self.remote(second.id, .canceled)) != nil)
        #expect(await alice.localInvitations[second.id]?.state == .canceled)
        do {
            try await bob.acceptRemoteInvitation("no-such-id")
            Issue.record("accepted an unknown invitation")
        } catch { #expect(error.code == .invitationNotStarted) }
        do {
            try await bob.cancelLocalInvitation(second.id)   // not bob's to cancel
            Issue.record("the callee canceled the caller's invitation")
        } catch { #expect(error.code == .invitationNotStarted) }
        await alice.logout()
        await bob.logout()
    }

    @Test("§1.8: a callee offline 30 s (scaled) after sending → remoteOffline; one that logs in before gets it")
    func remoteOffline() async throws {
        let harness = try await Self.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let sentAt = ContinuousClock.now
        let lost = try await alice.sendLocalInvitation(calleeId: "carol")
        let late = try await alice.sendLocalInvitation(calleeId: "dave")
        let (dave, daveEvents) = try await Harness.client("dave", port: harness.port)
        #expect(await daveEvents.first(within: soon, where: Self.remote(late.id, .invitationReceived)) != nil)
        #expect(await aliceEvents.first(within: soon, where: Self.local(late.id, .receivedByRemote)) != nil)

        let failed = await aliceEvents.first(within: soon, where: Self.local(lost.id, .failure))
        #expect(ContinuousClock.now - sentAt >= .seconds(1))
        if case .call(.local(let local))? = failed { #expect(local.error == .remoteOffline) } else { Issue.record("no remoteOffline") }
        // Carol logging in now gets nothing: it is over.
        let (carol, carolEvents) = try await Harness.client("carol", port: harness.port)
        #expect(await carolEvents.first(within: .milliseconds(300), where: Self.remote(lost.id, .invitationReceived)) == nil)
        await alice.logout()
        await dave.logout()
        await carol.logout()
    }

    @Test("§1.8: a callee that logs out ends its invitations at once: the caller hears remoteOffline long before any timer (expiry 60 s here)")
    func calleeLogoutEndsTheInvitation() async throws {
        let harness = try await Harness.start { $0.invitationExpiry = .seconds(60) }
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .invitationReceived)) != nil)
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .receivedByRemote)) != nil)
        let loggedOut = ContinuousClock.now
        await bob.logout()
        let failed = await aliceEvents.first(within: .seconds(5), where: Self.local(sent.id, .failure))
        #expect(ContinuousClock.now - loggedOut < .seconds(5))
        if case .call(.local(let local))? = failed { #expect(local.error == .remoteOffline) } else { Issue.record("the caller still rings") }
        await alice.logout()
    }

    @Test("§1.8: a callee online whose SDK never acknowledges → remoteNoResponse at 30 s (scaled)")
    func noResponse() async throws {
        let harness = try await Self.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        // Bob speaks the protocol by hand and never acknowledges.
        let bob = try await RawPeer.connect(port: harness.port)
        var hello = ByteBuffer(string: RawPeer.upgradeRequest())
        hello.writeImmutableBuffer(RawPeer.text(#"{"type":"login","id":1,"appId":"\#(Harness.appId)","userId":"bob","token":"\#(Harness.token("bob"))","heartbeatInterval":5}"#))
        try await bob.write(hello)
        // The raw socket's frames polled for the login reply.
        _ = await eventually(within: soon) { bob.frames().first?.text.contains(#""type":"ok""#) == true }
        #expect(try await alice.queryPeersOnlineStatus(["bob"]).first?.state == .online)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob", content: "hello?")
        let failed = await aliceEvents.first(within: soon, where: Self.local(sent.id, .failure))
        if case .call(.local(let local))? = failed { #expect(local.error == .remoteNoResponse) } else { Issue.record("no remoteNoResponse") }
        #expect(bob.frames().contains { $0.text.contains(#""type":"remoteInvitation""#) && $0.text.contains(#""event":"invitationReceived""#) })
        // Bob's failure goes out with alice's, on his own socket: awaited, not assumed to be there already.
        #expect(await eventually(within: soon) {
            bob.frames().contains { $0.text.contains(#""event":"failure""#) && $0.text.contains(#""code":1"#) }   // localOffline
        }, "\(bob.frames().map(\.text))")
        await bob.close()
        await alice.logout()
    }

    @Test("§1.8: acknowledged and left alone → expire at 60 s (scaled) on both sides; answering after is alreadyEnd")
    func expiry() async throws {
        let harness = try await Self.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let sentAt = ContinuousClock.now
        let sent = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .receivedByRemote)) != nil)
        let callerSide = await aliceEvents.first(within: soon, where: Self.local(sent.id, .failure))
        let calleeSide = await bobEvents.first(within: soon, where: Self.remote(sent.id, .failure))
        #expect(ContinuousClock.now - sentAt >= .seconds(2))
        if case .call(.local(let local))? = callerSide { #expect(local.error == .expire) } else { Issue.record("the caller saw no expiry") }
        if case .call(.remote(let remote))? = calleeSide { #expect(remote.error == .expire) } else { Issue.record("the callee saw no expiry") }
        do {
            try await bob.acceptRemoteInvitation(sent.id)
            Issue.record("accepted an expired invitation")
        } catch { #expect(error.code == .invitationAlreadyEnd) }
        await alice.logout()
        await bob.logout()
    }

    @Test("§1.8/P-1: the callee cut: an invitation sent meanwhile arrives once when it is back; a cancel made meanwhile too")
    func calleeCut() async throws {
        let harness = try await Self.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: proxy.port) { $0.presenceTimeout = 3 }
        let early = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await bobEvents.first(within: soon, where: Self.remote(early.id, .invitationReceived)) != nil)

        proxy.setRefuseNew(true)
        proxy.cutAll()
        #expect(await bobEvents.first(within: soon) { $0.link?.currentState == .disconnected } != nil)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob", content: "while you were away")
        try await alice.cancelLocalInvitation(early.id)
        proxy.setRefuseNew(false)
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .invitationReceived)) != nil)
        #expect(await bobEvents.first(within: soon, where: Self.remote(early.id, .canceled)) != nil)
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .receivedByRemote)) != nil)
        try await bob.acceptRemoteInvitation(sent.id)
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .acceptedByRemote)) != nil)
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .accepted)) != nil)
        #expect(await Self.states(bobEvents, sent.id) == ["invitationReceived", "accepted"])
        #expect(await Self.states(bobEvents, early.id) == ["invitationReceived", "canceled"])
        #expect(await Self.states(aliceEvents, sent.id) == ["receivedByRemote", "acceptedByRemote"])
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("§1.8/P-1: the caller cut: the acceptance made meanwhile reaches it once when it is back")
    func callerCut() async throws {
        let harness = try await Self.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port) { $0.presenceTimeout = 3 }
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .receivedByRemote)) != nil)

        proxy.setRefuseNew(true)
        proxy.cutAll()
        #expect(await aliceEvents.first(within: soon) { $0.link?.currentState == .disconnected } != nil)
        try await bob.acceptRemoteInvitation(sent.id, response: "ok")
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .accepted)) != nil)
        proxy.setRefuseNew(false)
        let accepted = await aliceEvents.first(within: soon, where: Self.local(sent.id, .acceptedByRemote))
        if case .call(.local(let local))? = accepted { #expect(local.response == "ok") } else { Issue.record("alice never learnt") }
        #expect(await aliceEvents.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        #expect(await Self.states(aliceEvents, sent.id) == ["receivedByRemote", "acceptedByRemote"])
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("§1.8/T-12: after a server restart a live invitation is sent again by the caller's SDK and can still be accepted, each state reported once")
    func serverRestart() async throws {
        let harness = try await Self.start()
        let port = harness.port
        let (alice, aliceEvents) = try await Harness.client("alice", port: port)
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .receivedByRemote)) != nil)
        await harness.stop()
        var config = Harness.serverConfig(port: port)
        config.invitationExpiry = .seconds(5)
        let restarted = try RTMServer(configuration: config)
        try await restarted.start()
        #expect(await aliceEvents.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        #expect(await bobEvents.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        // The new server knows it again once alice's SDK has re-sent it; bob's SDK acknowledges it.
        let accepted = await eventually(within: soon, every: .milliseconds(20)) {
            (try? await bob.acceptRemoteInvitation(sent.id)) != nil
        }
        #expect(accepted)
        #expect(await aliceEvents.first(within: soon, where: Self.local(sent.id, .acceptedByRemote)) != nil)
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .accepted)) != nil)
        #expect(await Self.states(aliceEvents, sent.id) == ["receivedByRemote", "acceptedByRemote"])
        #expect(await Self.states(bobEvents, sent.id) == ["invitationReceived", "accepted"])
        await alice.logout()
        await bob.logout()
        try? await restarted.shutdown()
    }

    @Test("§1.8/K-4: the caller logs out: its live invitations are canceled and the callee is told")
    func callerLogoutCancels() async throws {
        let harness = try await Self.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let sent = try await alice.sendLocalInvitation(calleeId: "bob")
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .invitationReceived)) != nil)
        await alice.logout()
        #expect(await alice.localInvitations.isEmpty)
        #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .canceled)) != nil)
        do {
            try await bob.acceptRemoteInvitation(sent.id)
            Issue.record("accepted the invitation of a caller who left")
        } catch { #expect(error.code == .invitationAlreadyEnd) }
        await bob.logout()
    }

    @Test("§1.8: cancel racing accept has exactly one outcome, the same on both sides")
    func cancelRacingAccept() async throws {
        let harness = try await Self.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        var outcomes: [LocalInvitationState: Int] = [:]
        for round in 0..<12 {
            let sent = try await alice.sendLocalInvitation(calleeId: "bob", content: "round \(round)")
            #expect(await bobEvents.first(within: soon, where: Self.remote(sent.id, .invitationReceived)) != nil)
            async let cancel: Bool = { do { try await alice.cancelLocalInvitation(sent.id); return true } catch { return false } }()
            async let accept: Bool = { do { try await bob.acceptRemoteInvitation(sent.id); return true } catch { return false } }()
            let (canceled, accepted) = await (cancel, accept)
            #expect(canceled != accepted, "round \(round): cancel \(canceled), accept \(accepted)")
            let callerFinal = await aliceEvents.first(within: soon) { event in
                if case .call(.local(let i)) = event { i.id == sent.id && i.state.isFinal } else { false }
            }
            let calleeFinal = await bobEvents.first(within: soon) { event in
                if case .call(.remote(let i)) = event { i.id == sent.id && i.state.isFinal } else { false }
            }
            guard case .call(.local(let local))? = callerFinal, case .call(.remote(let remote))? = calleeFinal else {
                Issue.record("round \(round): a side never saw the end")
                continue
            }
            #expect(local.state == (accepted ? .acceptedByRemote : .canceled))
            #expect(remote.state == (accepted ? .accepted : .canceled))
            outcomes[local.state, default: 0] += 1
            #expect(await Self.states(aliceEvents, sent.id).filter { $0 == "acceptedByRemote" || $0 == "canceled" }.count == 1)
            #expect(await Self.states(bobEvents, sent.id).filter { $0 == "accepted" || $0 == "canceled" }.count == 1)
        }
        #expect(outcomes.values.reduce(0, +) == 12)
        await alice.logout()
        await bob.logout()
    }
}
