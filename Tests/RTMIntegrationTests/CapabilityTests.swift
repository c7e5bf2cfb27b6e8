import Foundation
import NIOConcurrencyHelpers
import RTMAuth
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Capability tokens and private channels end to end: a real server, SDK clients over real
/// sockets, every refusal with its request's error (-10104 notPermitted).
@Suite(.realTime, .serialized)
struct CapabilityTests {
    static func capability(_ user: String, channels: [String: Set<Capabilities.ChannelOperation>] = [:],
                           users: [String: Set<Capabilities.UserOperation>] = [:], expiresIn: UInt32? = nil) -> String {
        let now = UInt32(Date().timeIntervalSince1970)
        return CapabilityToken.mint(Capabilities(channels: channels, users: users), appId: Harness.appId, userId: user,
                                    appCertificate: Harness.certificate, issuedAt: now, expiresAt: expiresIn.map { now + $0 })
    }

    /// The error code a call failed with (nil: it succeeded).
    static func code(_ body: () async throws -> Void) async -> RTMErrorCode? {
        do {
            try await body()
            return nil
        } catch let error as RTMError {
            return error.code
        } catch {
            Issue.record("not an RTMError: \(error)")
            return RTMErrorCode(rawValue: 0)
        }
    }

    static let all = Set(Capabilities.ChannelOperation.allCases)

    @Test("a token limited to room.* works on room.a and is refused on secret: subscribe, publish, presence, metadata, history, lock, stream")
    func limitedToRoom() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port, login: false)
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["room.*": Self.all]))
        for (channel, expected) in [("room.a", nil), ("secret", RTMErrorCode.notPermitted)] as [(String, RTMErrorCode?)] {
            #expect(await Self.code { _ = try await alice.subscribe(channel) } == expected, "subscribe \(channel)")
            #expect(await Self.code { _ = try await alice.publish(channel: channel, message: "hi") } == expected, "publish \(channel)")
            #expect(await Self.code { _ = try await alice.publish(channel: channel, message: "hi", storeInHistory: true) } == expected, "publish JSON \(channel)")
            #expect(await Self.code { _ = try await alice.whoNow(channel: channel) } == expected, "whoNow \(channel)")
            #expect(await Self.code { _ = try await alice.getChannelMemberCount([channel]) } == expected, "memberCount \(channel)")
            #expect(await Self.code { _ = try await alice.setChannelMetadata(channel, Metadata(items: [MetadataItem(key: "k", value: "v")])) } == expected,
                    "setChannelMetadata \(channel)")
            #expect(await Self.code { _ = try await alice.getChannelMetadata(channel) } == expected, "getChannelMetadata \(channel)")
            #expect(await Self.code { _ = try await alice.getMessages(channel: channel) } == expected, "getMessages \(channel)")
            #expect(await Self.code { try await alice.setLock(channel: channel, lockName: "l") } == expected, "setLock \(channel)")
            #expect(await Self.code { _ = try await alice.getLocks(channel: channel) } == expected, "getLocks \(channel)")
            let stream = try alice.createStreamChannel(channel)
            let joined = await Self.code { _ = try await stream.join() }
            #expect(joined == expected, "stream join \(channel): \(String(describing: joined))")
            if expected == nil {
                try await stream.joinTopic("t")
                try await stream.publishTopicMessage(topic: "t", message: "x")
                await stream.leave()
            }
        }
        #expect(await alice.subscribedChannels == ["room.a"])
        await alice.logout()
    }

    @Test("user grants: user messages (binary) only to the granted user, peer status and invitations need theirs; oneself is always allowed")
    func userGrants() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port, login: false)
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", users: ["bob": [.send]]))
        #expect(await Self.code { _ = try await alice.publish(toUser: "bob", message: "hi") } == nil)
        #expect(await Self.code { _ = try await alice.publish(toUser: "carol", message: "hi") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.queryPeersOnlineStatus(["bob"]) } == .notPermitted)
        #expect(await Self.code { _ = try await alice.sendLocalInvitation(calleeId: "bob") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.getUserMetadata(userId: "bob") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.setUserMetadata(Metadata(items: [MetadataItem(key: "k", value: "v")])) } == nil)
        #expect(await Self.code { _ = try await alice.whereNow() } == nil)
        // No channel grant at all: every channel is closed.
        #expect(await Self.code { _ = try await alice.subscribe("room") } == .notPermitted)
        await alice.logout()
    }

    @Test("namespaces reloaded while the server runs: a channel made private ends the subscriptions without a grant (unsubscribed) and refuses new ones; reloaded again, it opens; a hooked namespace without a hook is refused")
    func namespacesReloaded() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port, login: false)
        try await bob.login(token: Harness.token("bob"), capability: Self.capability("bob", channels: ["vip.*": Self.all]))
        _ = try await alice.subscribe("vip.a")
        _ = try await alice.subscribe("lobby")
        _ = try await bob.subscribe("vip.a")
        try await harness.server.reloadNamespaces([try ChannelNamespace(parsing: "vip.*:private")])
        let ended = await events.first(within: soon) { if case .unsubscribed = $0 { true } else { false } }
        guard case .unsubscribed(let event)? = ended else { Issue.record("no unsubscribed event"); return }
        #expect(event.channelName == "vip.a" && event.code == .notPermitted)
        #expect(await alice.subscribedChannels == ["lobby"])
        #expect(await Self.code { _ = try await alice.subscribe("vip.b") } == .notPermitted)
        _ = try await bob.publish(channel: "vip.a", message: "bob keeps his")   // granted: still subscribed and publishing
        try await harness.server.reloadNamespaces([])
        _ = try await alice.subscribe("vip.b")
        let hooked = try ChannelNamespace(parsing: "vip.*:hook-subscribe")
        await #expect(throws: AuthorizationHookConfigurationError.self) { try await harness.server.reloadNamespaces([hooked]) }
        await alice.logout()
        await bob.logout()
    }

    @Test("per-connection rates reloaded while the server runs: an open connection's publish rate changes at once, with the new rate in the refusal; bad values are refused")
    func limitsReloaded() async throws {
        let harness = try await Harness.start()   // publish rate: unlimited
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        for index in 0..<5 { _ = try await alice.publish(channel: "room", message: "\(index)") }
        try await harness.server.reloadLimits(ConnectionLimits(publishRatePerSecond: 2, errorReplyRatePerSecond: 100, errorReplyBurst: 1000))
        var refusal: RTMError?
        for index in 0..<5 {
            do { _ = try await alice.publish(channel: "room", message: "\(index)") } catch { refusal = error }
        }
        #expect(refusal?.code == .channelPublishMessageTooFrequent && refusal?.reason.contains("more than 2 messages") == true, "\(String(describing: refusal))")
        await #expect(throws: ServerConfigurationError.self) {
            try await harness.server.reloadLimits(ConnectionLimits(publishRatePerSecond: -1, errorReplyRatePerSecond: 0, errorReplyBurst: 0))
        }
        await alice.logout()
    }

    @Test("renewToken with a narrower capability token ends the subscriptions it no longer grants (unsubscribed event), at once")
    func narrowedByRenewal() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, login: false)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["room.*": [.subscribe]]))
        _ = try await alice.subscribe("room.a")
        _ = try await alice.subscribe("room.b")
        try await alice.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["room.a": [.subscribe]]))
        let ended = await events.first(within: soon) { if case .unsubscribed = $0 { true } else { false } }
        guard case .unsubscribed(let event)? = ended else { Issue.record("no unsubscribed event"); return }
        #expect(event.channelName == "room.b")
        #expect(event.code == .notPermitted)
        #expect(event.reason.contains("'room.b'"))
        #expect(await alice.subscribedChannels == ["room.a"])
        // room.b's messages no longer reach alice; room.a's still do.
        let mark = await events.mark()
        _ = try await bob.publish(channel: "room.b", message: "not for alice")
        _ = try await bob.publish(channel: "room.a", message: "for alice")
        let received = await events.first(since: mark, within: soon) { $0.messageEvent != nil }?.messageEvent
        #expect(received?.channelName == "room.a")
        #expect(await Self.code { _ = try await alice.subscribe("room.b") } == .notPermitted)
        // A renewal without a capability token keeps the grants.
        try await alice.renewToken(Harness.token("alice"))
        #expect(await Self.code { _ = try await alice.subscribe("room.b") } == .notPermitted)
        await alice.logout()
        await bob.logout()
    }

    @Test("a session resumed with a narrower capability token (renewed while disconnected) loses the channels it no longer grants")
    func resumedNarrower() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, events) = try await Harness.client("alice", port: proxy.port, login: false)
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["room.*": [.subscribe]]))
        _ = try await alice.subscribe("room.a")
        _ = try await alice.subscribe("room.b")
        proxy.setRefuseNew(true)
        proxy.cutAll()
        _ = await events.first(within: soon) { $0.link?.currentState == .disconnected }
        try await alice.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["room.a": [.subscribe]]))
        let mark = await events.mark()
        proxy.setRefuseNew(false)
        let ended = await events.first(since: mark, within: soon) { if case .unsubscribed = $0 { true } else { false } }
        guard case .unsubscribed(let event)? = ended else { Issue.record("no unsubscribed event"); return }
        #expect(event.channelName == "room.b")
        #expect(await events.first(since: mark, within: soon) { $0.link?.currentState == .connected }?.link?.isResumed == true)
        #expect(await alice.subscribedChannels == ["room.a"])
        await alice.logout()
        try? await proxy.stop()
    }

    @Test("login(credentialsProvider:): every login asks for both tokens; a narrower capability token at a reconnection takes effect")
    func credentialsProvider() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, events) = try await Harness.client("alice", port: proxy.port, login: false)
        let calls = NIOLockedValueBox(0)
        try await alice.login(credentialsProvider: {
            let call = calls.withLockedValue { $0 += 1; return $0 }
            let channels: [String: Set<Capabilities.ChannelOperation>] = call == 1 ? ["room.*": [.subscribe]] : ["room.a": [.subscribe]]
            return RTMCredentials(token: Harness.token("alice"), capability: Self.capability("alice", channels: channels))
        })
        _ = try await alice.subscribe("room.a")
        _ = try await alice.subscribe("room.b")
        let mark = await events.mark()
        proxy.cutAll()
        let ended = await events.first(since: mark, within: soon) { if case .unsubscribed = $0 { true } else { false } }
        guard case .unsubscribed(let event)? = ended else { Issue.record("no unsubscribed event"); return }
        #expect(event.channelName == "room.b")
        #expect(calls.withLockedValue { $0 } >= 2)
        #expect(await alice.subscribedChannels == ["room.a"])
        await alice.logout()
        try? await proxy.stop()
    }

    @Test("a STREAM connection: its join needs stream.join, its topics stream.publish; a renewal that drops the channel ends the membership")
    func streamGrants() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, login: false)
        try await alice.login(token: Harness.token("alice"), capability: Self.capability("alice", channels: ["game": [.streamJoin]]))
        let game = try alice.createStreamChannel("game")
        _ = try await game.join()
        #expect(await Self.code { try await game.joinTopic("moves") } == .notPermitted)
        try await game.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["game": [.streamJoin, .streamPublish]]))
        try await game.joinTopic("moves")
        try await game.publishTopicMessage(topic: "moves", message: "e4")
        let mark = await events.mark()
        #expect(await Self.code {
            try await game.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["lobby": [.streamJoin]]))
        } == .notPermitted)
        // The membership ends; its rejoin is refused for good (failed, joinFailed).
        let failed = await events.first(since: mark, within: soon) { ($0.link.map { $0.serviceType == .stream && $0.currentState == .failed }) ?? false }?.link
        #expect(failed?.reasonCode == .joinFailed)
        #expect(await StreamTests.eventually { harness.server.connectionCounters.stream == 0 })
        #expect(await alice.linkState == .connected)
        await alice.logout()
    }

    @Test("a MESSAGE renewal's narrower capability reaches the user's STREAM connections at once: one whose channel it no longer grants ends")
    func messageRenewalReachesStreams() async throws {
        let harness = try await Harness.start()
        let (alice, events) = try await Harness.client("alice", port: harness.port, login: false)
        try await alice.login(token: Harness.token("alice"),
                              capability: Self.capability("alice", channels: ["game": [.streamJoin], "lobby": [.streamJoin], "room.*": [.subscribe]]))
        let game = try alice.createStreamChannel("game")
        let lobby = try alice.createStreamChannel("lobby")
        _ = try await game.join()
        _ = try await lobby.join()
        let mark = await events.mark()
        try await alice.renewToken(Harness.token("alice"), capability: Self.capability("alice", channels: ["lobby": [.streamJoin], "room.*": [.subscribe]]))
        let failed = await events.first(since: mark, within: soon) { ($0.link.map { $0.serviceType == .stream && $0.currentState == .failed }) ?? false }?.link
        #expect(failed?.reasonCode == .joinFailed)
        #expect(failed?.affectedChannels == ["game"])
        #expect(await StreamTests.eventually { harness.server.connectionCounters.stream == 1 })
        #expect(await alice.linkState == .connected)
        await alice.logout()
    }

    @Test("a private namespace: refused without a capability token, open with one that grants it; other channels stay open")
    func privateChannels() async throws {
        let harness = try await Harness.start { $0.namespaces = [try! ChannelNamespace(parsing: "private.*:private")] }
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        #expect(await Self.code { _ = try await alice.subscribe("private.ops") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.publish(channel: "private.ops", message: "x") } == .notPermitted)
        #expect(await Self.code { _ = try await alice.subscribe("public.chat") } == nil)
        let (bob, _) = try await Harness.client("bob", port: harness.port, login: false)
        try await bob.login(token: Harness.token("bob"), capability: Self.capability("bob", channels: ["private.ops": [.subscribe, .publish]]))
        #expect(await Self.code { _ = try await bob.subscribe("private.ops") } == nil)
        #expect(await Self.code { _ = try await bob.publish(channel: "private.ops", message: "x") } == nil)
        await alice.logout()
        await bob.logout()
    }

    @Test("namespaces: no client publishes (the admin API publishes), no presence (quiet members, no presence events or requests), no history, at most N members")
    func namespaceRules() async throws {
        let harness = try await Harness.start {
            $0.namespaces = ["news.*:no-client-publish", "quiet.*:no-presence", "ephemeral.*:no-history", "small.*:max-members=2"]
                .map { try! ChannelNamespace(parsing: $0) }
        }
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        let (carol, _) = try await Harness.client("carol", port: harness.port)
        // news.*: subscribing works, publishing is the backend's.
        _ = try await alice.subscribe("news.today")
        #expect(await Self.code { _ = try await bob.publish(channel: "news.today", message: "x") } == .notPermitted)
        // quiet.*: nobody is listed or announced.
        _ = try await alice.subscribe("quiet.a")
        let mark = await aliceEvents.mark()
        let members = try await bob.subscribe("quiet.a")
        #expect(members.isEmpty)
        #expect(await Self.code { _ = try await bob.whoNow(channel: "quiet.a") } == .notPermitted)
        _ = try await bob.publish(channel: "quiet.a", message: "hello")
        #expect(await aliceEvents.first(since: mark, within: soon) { $0.messageEvent?.text == "hello" } != nil)
        #expect(await aliceEvents.matching { $0.presenceEvent?.channelName == "quiet.a" && $0.presenceEvent?.userId == "bob" }.isEmpty)
        // ephemeral.*: live messages only.
        _ = try await alice.publish(channel: "ephemeral.a", message: "live")
        #expect(await Self.code { _ = try await alice.publish(channel: "ephemeral.a", message: "kept", storeInHistory: true) } == .historyOperationNotPermitted)
        #expect(await Self.code { _ = try await alice.getMessages(channel: "ephemeral.a") } == .historyOperationNotPermitted)
        // small.*: the third member is refused; a member leaving makes room.
        _ = try await alice.subscribe("small.room")
        _ = try await bob.subscribe("small.room")
        _ = try await bob.subscribe("small.room")   // subscribing again is not a new member
        #expect(await Self.code { _ = try await carol.subscribe("small.room") } == .channelSubscribeFailed)
        try await bob.unsubscribe("small.room")
        _ = try await carol.subscribe("small.room")
        for client in [alice, bob, carol] { await client.logout() }
    }

    @Test("a bad capability token fails the login: another user's, another certificate's, expired")
    func badTokenFailsLogin() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port, login: false)
        let forged = CapabilityToken.mint(Capabilities(channels: ["*": Self.all]), appId: Harness.appId, userId: "alice",
                                          appCertificate: "not-the-app-certificate-0000000", issuedAt: 0, expiresAt: nil)
        for (token, code) in [(Self.capability("bob", channels: ["*": Self.all]), RTMErrorCode.invalidToken), (forged, .invalidToken)] {
            do throws(RTMError) {
                try await alice.login(token: Harness.token("alice"), capability: token)
                Issue.record("login accepted")
            } catch {
                #expect(error.code == code || error.reason.contains("capability token rejected"), "\(error)")
            }
            await alice.logout()
        }
    }
}
