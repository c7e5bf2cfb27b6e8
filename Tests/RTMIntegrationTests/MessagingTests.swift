import Foundation
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMClient

/// End to end: a real server on 127.0.0.1:0, real clients over real sockets.
@Suite(.realTime, .serialized)
struct MessagingTests {
    @Test("K-1/C-1: a created client opens nothing; login connects; publish reaches subscribers with presence")
    func publishSubscribe() async throws {
        let harness = try await Harness.start()
        let (idle, _) = try await Harness.client("idle", port: harness.port, login: false)
        #expect(harness.server.connectionCount == 0)   // K-1
        _ = idle
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        #expect(await alice.linkState == .connected)
        #expect(await alice.connectionState == .connected)
        let first = try await alice.subscribe("room")
        #expect(first == ["alice"])
        let members = try await bob.subscribe("room")
        #expect(Set(members) == ["alice", "bob"])
        let join = await aliceEvents.first(within: soon) { $0.presenceEvent?.kind == .remoteJoin && $0.presenceEvent?.userId == "bob" }
        #expect(join != nil)
        let seq = try await alice.publish(channel: "room", message: "hello")
        #expect(seq == 1)
        try await alice.publish(channel: "room", data: Data([1, 2, 3]), customType: "bin")
        let text = await bobEvents.first(within: soon) { $0.messageEvent?.text == "hello" }
        #expect(text?.messageEvent?.publisher == "alice")
        #expect(text?.messageEvent?.seq == 1)
        let binary = await bobEvents.first(within: soon) { $0.messageEvent?.data != nil }
        #expect(binary?.messageEvent?.data == Data([1, 2, 3]))
        #expect(binary?.messageEvent?.customType == "bin")
        // User (peer-to-peer) message.
        try await bob.publish(toUser: "alice", message: "psst")
        let direct = await aliceEvents.first(within: soon) { $0.messageEvent?.channelType == .user }
        #expect(direct?.messageEvent?.text == "psst")
        #expect(direct?.messageEvent?.publisher == "bob")
        // Offline receiver: stored for later, and the receipt says so (M-1; the reference's -11035).
        let receipt = try await bob.publish(toUser: "nobody", message: "x")
        #expect(receipt.receiverOnline == false)
        #expect(receipt.stored)
        // P-4: unsubscribe is an intentional leave, seen at once.
        try await bob.unsubscribe("room")
        let leave = await aliceEvents.first(within: soon) { $0.presenceEvent?.kind == .remoteLeave && $0.presenceEvent?.userId == "bob" }
        #expect(leave != nil)
        await alice.logout()
        await bob.logout()
    }

    @Test("P-4/H-4: logout is seen by members at once, with no timers involved")
    func logoutLeavesAtOnce() async throws {
        let harness = try await Harness.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        let (bob, _) = try await Harness.client("bob", port: harness.port)
        try await alice.subscribe("room")
        try await bob.subscribe("room")
        let start = ContinuousClock.now
        await bob.logout()
        let leave = await aliceEvents.first(within: soon) { $0.presenceEvent?.kind == .remoteLeave }
        #expect(leave?.presenceEvent?.userId == "bob")
        #expect(ContinuousClock.now - start < .milliseconds(500))   // not the 0.9 s grace window
        #expect(await bob.linkState == .idle)
        #expect(await bob.connectionState == .disconnected)
        await alice.logout()
    }

    @Test("C-6: a second login with the same user id kicks the first, which never logs in again by itself")
    func secondLoginKicksFirst() async throws {
        let harness = try await Harness.start()
        let (first, firstEvents) = try await Harness.client("alice", port: harness.port)
        let (second, secondEvents) = try await Harness.client("alice", port: harness.port)
        let kicked = await firstEvents.first(within: soon) { $0.link?.currentState == .failed }
        #expect(kicked?.link?.reasonCode == .sameUidLogin)
        #expect(kicked?.link?.operation == .serverReject)
        let aborted = await firstEvents.first(within: soon) { $0.classic == .aborted }
        #expect(aborted != nil)
        // Wait well past every backoff: the kicked client must not come back and kick the other.
        let flap = await secondEvents.next(within: .seconds(1)) { $0.link?.currentState == .failed }
        #expect(flap == nil)
        #expect(await first.linkState == .failed)
        #expect(await second.linkState == .connected)
        #expect(harness.server.sessionCount == 1)
        // In aborted, APIs fail clearly until logout.
        do {
            try await first.publish(channel: "room", message: "x")
            Issue.record("published while aborted")
        } catch {
            #expect(error.code == .loginAborted)
        }
        do {
            try await first.login(token: Harness.token("alice"))
            Issue.record("logged in while aborted")
        } catch {
            #expect(error.code == .loginAborted)
        }
        await first.logout()
        await second.logout()
    }

    @Test("C-1: bad and expired tokens are typed errors; the link goes to failed with the reason")
    func badTokens() async throws {
        let harness = try await Harness.start()
        let (client, events) = try await Harness.client("alice", port: harness.port, login: false)
        do {
            try await client.login(token: "006garbage")
            Issue.record("garbage token accepted")
        } catch {
            #expect(error.code == .invalidToken)
        }
        let failed = await events.first(within: soon) { $0.link?.currentState == .failed }
        #expect(failed?.link?.reasonCode == .invalidToken)
        do {
            try await client.login(token: Harness.token("alice", expiresIn: -10))
            Issue.record("expired token accepted")
        } catch {
            #expect(error.code == .tokenExpired)
        }
        do {
            try await client.login(token: Harness.token("mallory"))
            Issue.record("another user's token accepted")
        } catch {
            #expect(error.code == .invalidToken)
        }
        #expect(await client.connectionState == .disconnected)
    }
}
