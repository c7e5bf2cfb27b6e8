import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Call invitations across a server restart on the same data directory (AGORA_REFERENCE §1.8,
/// SPEC T-12): kept in the embedded store, their timers counted from the first invite, the
/// callee's catch-up and the caller's resend answered from it, answered ones never ringing again.
@Suite(.realTime, .serialized)
struct InvitationRestartTests {
    /// A MESSAGE connection spoken by hand, so that a test sees every reply as it is on the wire
    /// and decides when the user comes back (an SDK resends and acknowledges by itself).
    final class RawUser: Sendable {
        let peer: RawPeer
        private let lastID = NIOLockedValueBox(1)

        private init(peer: RawPeer) { self.peer = peer }

        /// Connects and logs in (heartbeat 5 s: the server's minimum in `rtm serve`).
        static func login(_ user: String, port: Int) async throws -> RawUser {
            let peer = try await RawPeer.connect(port: port)
            var hello = ByteBuffer(string: RawPeer.upgradeRequest())
            hello.writeImmutableBuffer(RawPeer.text(#"{"type":"login","id":1,"appId":"\#(Harness.appId)","userId":"\#(user)","token":"\#(Harness.token(user))","heartbeatInterval":5,"presenceTimeout":5}"#))
            try await peer.write(hello)
            let raw = RawUser(peer: peer)
            let reply = await raw.frame(within: soon) { Self.id(of: $0) == 1 }
            try #require(reply != nil, "\(user) was not logged in: \(peer.frames().map(\.text))")
            return raw
        }

        /// Sends a request (its `id` added) and returns the reply's text.
        func request(_ json: String) async throws -> String {
            let id = lastID.withLockedValue { value in value += 1; return value }
            try await peer.write(RawPeer.text("{\"id\":\(id),\(json.dropFirst())"))
            let reply = await frame(within: soon) { Self.id(of: $0) == id }
            return try #require(reply, "no reply to \(json)")
        }

        /// Waits for a frame whose text satisfies `match` (pinging meanwhile, so that a long wait
        /// is not silence); nil after `timeout`.
        func frame(within timeout: Duration, after skip: Int = 0, where match: (String) -> Bool) async -> String? {
            var lastPing = ContinuousClock.now
            // Polling the raw socket's frames.
            return await firstValue(within: timeout) {
                if let found = peer.frames().dropFirst(skip).map(\.text).first(where: match) { return found }
                if ContinuousClock.now - lastPing > .seconds(1) {
                    try? await peer.write(RawPeer.text(#"{"type":"ping"}"#))
                    lastPing = ContinuousClock.now
                }
                return nil
            }
        }

        /// The request id a reply answers.
        static func id(of text: String) -> Int? {
            let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            return object?["id"] as? Int
        }
    }

    @Test("§1.8/T-12: kill -9 and a restart on the same data directory: the callee's catch-up acknowledgement works, the caller's resend is answered with where it stands, an accepted invitation does not ring again, and expiry still comes 6 s (scaled 60 s) after the first invite")
    func survivesKill9() async throws {
        let server = try await DurableServer(extraArguments: ["--test-invitation-expiry", "6"])
        let alice = try await RawUser.login("alice", port: server.port)
        let bob = try await RawUser.login("bob", port: server.port)
        let sentAt = ContinuousClock.now
        let ringing = try await alice.request(#"{"type":"invite","invitationId":"ringing","userId":"bob","text":"video?"}"#)
        #expect(ringing.contains(#""event":"sentToRemote""#))
        _ = try await alice.request(#"{"type":"invite","invitationId":"answered","userId":"bob"}"#)
        #expect(try await bob.request(#"{"type":"ackInvitation","invitationId":"ringing"}"#).contains(#""type":"ok""#))
        let accepted = try await bob.request(#"{"type":"acceptInvitation","invitationId":"answered","text":"on my way"}"#)
        #expect(accepted.contains(#""event":"accepted""#))   // answered once stored

        try await server.killAndRestart(outage: .seconds(2))   // no shutdown code runs; 2 s away
        // bob first: its catch-up must work without the caller's resend.
        let bobBack = try await RawUser.login("bob", port: server.port)
        let redelivered = await bobBack.frame(within: soon) { $0.contains(#""type":"remoteInvitation""#) && $0.contains("ringing") }
        #expect(redelivered?.contains(#""event":"invitationReceived""#) == true)
        let ack = try await bobBack.request(#"{"type":"ackInvitation","invitationId":"ringing"}"#)
        #expect(ack.contains(#""type":"ok""#) && ack.contains(#""event":"invitationReceived""#) && ack.contains(#""text":"video?""#), "\(ack)")
        // alice comes back (resumed: false) within her window and resends both.
        let aliceBack = try await RawUser.login("alice", port: server.port)
        let resentAt = ContinuousClock.now
        let resent = try await aliceBack.request(#"{"type":"invite","invitationId":"ringing","userId":"bob","text":"video?"}"#)
        #expect(resent.contains(#""event":"receivedByRemote""#), "\(resent)")
        let late = try await aliceBack.request(#"{"type":"invite","invitationId":"answered","userId":"bob"}"#)
        #expect(late.contains(#""event":"acceptedByRemote""#) && late.contains(#""text":"on my way""#), "\(late)")
        // Expiry from the first invite (6 s), not from the resend (which is ≥ 2 s later): seen
        // no earlier than 6 s after the first invite, and before 6 s after the resend (when an
        // expiry counted from the resend would come; a timer never fires early). The margin
        // between the two is the outage and the restart (over 2 s), not a tolerance on a pace.
        let expired = await aliceBack.frame(within: .seconds(20)) { $0.contains(#""type":"localInvitation""#) && $0.contains(#""event":"failure""#) }
        let seenAt = ContinuousClock.now
        #expect(expired?.contains(#""code":3"#) == true, "\(aliceBack.peer.frames().map(\.text))")
        #expect(seenAt - sentAt >= .seconds(6), "expired \(seenAt - sentAt) after the first invite")
        #expect(seenAt - resentAt < .seconds(6), "expired \(seenAt - resentAt) after the resend (\(resentAt - sentAt) after the first invite)")
        #expect(await bobBack.frame(within: soon) { $0.contains(#""event":"failure""#) && $0.contains("ringing") } != nil)
        // The accepted one never rang again.
        #expect(!bobBack.peer.frames().map(\.text).contains { $0.contains("answered") && $0.contains(#""type":"remoteInvitation""#) })
        await aliceBack.peer.close()
        await bobBack.peer.close()
        await alice.peer.close()
        await bob.peer.close()
    }

    @Test("§1.8/P-1: after a clean restart a caller back within its grace window keeps its invitation (accepted, each state once); one that stays away has its invitation canceled when the window ends, the callee told")
    func callerWindowAfterRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-invitations-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let configure = { (config: inout ServerConfiguration) in
            config.dataDirectory = directory
            config.invitationExpiry = .seconds(30)
        }
        let first = try await Harness.start(configure)
        let port = first.port
        let proxy = try await FaultProxy.scoped(targetPort: port)
        // alice goes through the proxy (and stays away after the restart: window 0.1 + 0.2 + 2 s);
        // carol comes back (window 0.1 + 0.2 + 30 s: however long a loaded machine's restart
        // and her reconnection take, she is back within it).
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port) { $0.presenceTimeout = 2 }
        let (carol, carolEvents) = try await Harness.client("carol", port: port) { $0.presenceTimeout = 30 }
        let (bob, bobEvents) = try await Harness.client("bob", port: port)
        let away = try await alice.sendLocalInvitation(calleeId: "bob")
        let back = try await carol.sendLocalInvitation(calleeId: "bob")
        #expect(await aliceEvents.first(within: soon, where: InvitationTests.local(away.id, .receivedByRemote)) != nil)
        #expect(await carolEvents.first(within: soon, where: InvitationTests.local(back.id, .receivedByRemote)) != nil)

        proxy.setRefuseNew(true)
        await first.stop()
        _ = try await Harness.start { config in   // the restarted server (stopped when the test ends)
            configure(&config)
            config.port = port
        }
        // alice's window (2.3 s) ends after the restart; a bound of 20 s on a failure only.
        #expect(await bobEvents.first(within: .seconds(20), where: InvitationTests.remote(away.id, .canceled)) != nil)
        #expect(await carolEvents.first(within: .seconds(20)) { $0.link?.operation == .reconnected && $0.link?.isResumed == false } != nil)
        try await bob.acceptRemoteInvitation(back.id, response: "coming")
        #expect(await carolEvents.first(within: soon, where: InvitationTests.local(back.id, .acceptedByRemote)) != nil)
        #expect(await InvitationTests.states(carolEvents, back.id) == ["receivedByRemote", "acceptedByRemote"])
        // bob's own event reaches his recorder through the SDK's event stream: awaited too.
        #expect(await bobEvents.first(within: soon, where: InvitationTests.remote(back.id, .accepted)) != nil)
        #expect(await InvitationTests.states(bobEvents, back.id) == ["invitationReceived", "accepted"])
        #expect(await InvitationTests.states(bobEvents, away.id) == ["invitationReceived", "canceled"])
        await carol.logout()
        await bob.logout()
        await alice.logout()
        try? await proxy.stop()
    }
}
