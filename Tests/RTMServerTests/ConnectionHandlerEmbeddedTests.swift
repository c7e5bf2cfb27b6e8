import Foundation
import NIOCore
import RTMAuth
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMServer

/// The connection handler driven frame by frame in an `EmbeddedChannel`, on a hub built in
/// memory: requests and their replies, the one outbox and its gate, with no socket and no clock.
struct ConnectionHandlerEmbeddedTests {
    private static func login(_ connection: EmbeddedConnection, user: String) async throws {
        try await connection.send(#"{"type":"login","id":1,"appId":"app","userId":"\#(user)","token":"t","heartbeatInterval":5,"presenceTimeout":15}"#)
        let replies = try await connection.receivedJSON()
        guard replies.first?["type"] as? String == "ok", replies.first?["id"] as? Int == 1 else {
            throw EmbeddedConnectionError("login not answered ok: \(replies)")
        }
    }

    @Test("a session frame by frame: login, subscribe, publish (the publisher's ok before its own copy, M-2), JSON ping and WebSocket ping (T-3)")
    func sessionFrameByFrame() async throws {
        let server = try EmbeddedServer()
        let alice = try await server.connect()
        try await Self.login(alice, user: "alice")

        try await alice.send(#"{"type":"subscribe","id":2,"channel":"room"}"#)
        let subscribed = try await alice.receivedJSON()
        #expect(subscribed.count == 1)
        #expect(subscribed.first?["id"] as? Int == 2)
        #expect(subscribed.first?["seq"] as? Int == 0)
        #expect(subscribed.first?["users"] as? [String] == ["alice"])

        try await alice.send(#"{"type":"publish","id":3,"channel":"room","text":"hello","msgId":77}"#)
        let published = try await alice.received()
        #expect(published.count == 2)
        #expect(published.first?.opcode == 0x1)
        #expect(published.first?.text.contains(#""id":3"#) == true)
        #expect(published.first?.text.contains(#""seq":1"#) == true)
        #expect(published.last?.opcode == 0x2)   // the channel message, binary (PROTOCOL §2.3)
        #expect(published.last.map { String(decoding: $0.payload, as: UTF8.self).contains("hello") } == true)

        try await alice.send(#"{"type":"ping","ts":42}"#)
        let pongs = try await alice.receivedJSON()
        #expect(pongs.count == 1)
        #expect(pongs.first?["type"] as? String == "pong")
        #expect(pongs.first?["ts"] as? Int == 42)
        try await alice.send(bytes: RawPeer.frame(opcode: 0x9, Array("beat".utf8)))
        let pong = try await alice.received()
        #expect(pong.map(\.opcode) == [0xA])
        #expect(pong.first?.text == "beat")
        #expect(alice.channel.isActive)
    }

    @Test("H-2, §1.7: a read tells the loop's sweep when to look next, without a look (an idle connection that pings is looked at only when its silence threshold or deadline comes); any other change asks for a look")
    func readMovesNextLook() async throws {
        let server = try EmbeddedServer()
        let alice = try await server.connect()
        try await Self.login(alice, user: "alice")
        typealias Look = (touched: Bool, next: UInt64, nextCheck: UInt64)
        let look: @Sendable (ConnectionHandler) -> Look = { handler in
            (handler.livenessTouched, handler.livenessSlot.map { handler.fanout.liveness.nextLook($0) } ?? .max,
             handler.lifecycle.nextCheck?.uptimeNanoseconds ?? 0)
        }
        // The login changed the state: a look at the next sweep.
        let afterLogin = try await alice.inspect(look)
        #expect(afterLogin.touched && afterLogin.next == 0)
        await server.loop.advanceTime(by: .milliseconds(300))   // one sweep (every 250 ms)
        let looked = try await alice.inspect(look)
        #expect(!looked.touched)
        #expect(looked.next == looked.nextCheck && looked.next > 0)
        // A ping: the next look moves with its read (the silence threshold counts from it).
        try await alice.send(#"{"type":"ping","ts":1}"#)
        _ = try await alice.receivedJSON()
        let pinged = try await alice.inspect(look)
        #expect(!pinged.touched)
        #expect(pinged.next == pinged.nextCheck && pinged.next > looked.next)
        // A change of state (a subscription) asks for a look again.
        try await alice.send(#"{"type":"subscribe","id":2,"channel":"room"}"#)
        _ = try await alice.receivedJSON()
        let subscribed = try await alice.inspect(look)
        #expect(subscribed.touched && subscribed.next == 0)
    }

    @Test("H-1: a JSON ping is answered with the codec's pong bytes in one text frame, on the fast path and off it")
    func pongBytes() async throws {
        let server = try EmbeddedServer()
        let alice = try await server.connect()
        try await Self.login(alice, user: "alice")
        // Fast path (no ts, ts either side, negative, the extremes), then the full decoder's
        // (a space, a leading plus sign): the same bytes either way.
        let pings: [(String, Int64?)] = [
            (#"{"type":"ping"}"#, nil), (#"{"type":"ping","ts":42}"#, 42), (#"{"ts":7,"type":"ping"}"#, 7),
            (#"{"type":"ping","ts":-3}"#, -3), (#"{"type":"ping","ts":9223372036854775807}"#, .max),
            (#"{"ts":-9223372036854775808,"type":"ping"}"#, .min), (#"{"type": "ping", "ts": 5}"#, 5),
        ]
        for (ping, ts) in pings {
            try await alice.send(ping)
            let frames = try await alice.received()
            #expect(frames.map(\.opcode) == [0x1], "\(ping)")
            #expect(frames.first?.payload == Array(FrameCodec.encode(Frame(type: .pong, ts: ts)).readableBytesView), "\(ping)")
        }
        #expect(alice.channel.isActive)
    }

    @Test("an error reply carries the request's id: a subscribe without a channel, a request of no known type")
    func errorRepliesCarryTheID() async throws {
        let server = try EmbeddedServer()
        let alice = try await server.connect()
        try await Self.login(alice, user: "alice")
        try await alice.send(#"{"type":"subscribe","id":7}"#)
        let refused = try await alice.receivedJSON()
        #expect(refused.first?["type"] as? String == "error")
        #expect(refused.first?["id"] as? Int == 7)
        try await alice.send(#"{"type":"nonsense","id":8}"#)
        let unknown = try await alice.receivedJSON()
        #expect(unknown.first?["type"] as? String == "error")
        #expect(unknown.first?["id"] as? Int == 8)
    }

    @Test("RFC 6455 §5.5.1: the client's close frame is answered with its code and nothing is written after it, not even a channel message published by another connection while the close frame still waits to leave")
    func nothingAfterTheCloseFrame() async throws {
        let server = try EmbeddedServer()
        let alice = try await server.connect()
        let bob = try await server.connect()
        try await Self.login(alice, user: "alice")
        try await Self.login(bob, user: "bob")
        for connection in [alice, bob] {
            try await connection.send(#"{"type":"subscribe","id":2,"channel":"room"}"#)
            _ = try await connection.received()
        }
        _ = try await alice.received()   // bob's join

        try await alice.stall()   // alice stops reading: her close frame's write never completes, the socket stays open
        try await alice.send(bytes: RawPeer.closeFrame(code: 4001))
        let closing = try await alice.received()
        #expect(closing.map(\.opcode) == [0x8])
        #expect(closing.first?.closeCode == 4001)

        try await bob.send(#"{"type":"publish","id":3,"channel":"room","text":"late"}"#)
        #expect(try await bob.received().count == 2)   // bob's ok and his own copy
        try await bob.send(#"{"type":"unsubscribe","id":4,"channel":"room"}"#)   // no presence event either (alice's close ended her session)
        #expect(try await bob.receivedJSON().first?["id"] as? Int == 4)
        #expect(try await alice.received().isEmpty)
        #expect(alice.channel.isActive)   // still waiting on the close frame's write (SPEC T-2 bounds that)
    }

    @Test("K-4: logout closes every STREAM connection of the user (1000), and no one else's")
    func logoutClosesStreams() async throws {
        let server = try EmbeddedServer()
        let alice = try await server.connect(), bob = try await server.connect()
        try await Self.login(alice, user: "alice")
        try await Self.login(bob, user: "bob")   // a STREAM join needs its user logged in on a MESSAGE connection
        var streams: [EmbeddedConnection] = []
        for (user, channel) in [("alice", "game"), ("alice", "match"), ("bob", "game")] {
            let stream = try await server.connect()
            try await stream.send(#"{"type":"join","id":1,"appId":"app","userId":"\#(user)","token":"t","channel":"\#(channel)"}"#)
            let joined = try await stream.receivedJSON()
            #expect(joined.first?["type"] as? String == "ok", "\(joined)")
            streams.append(stream)
        }
        for stream in streams { _ = try await stream.received() }   // the joins' presence

        try await alice.send(#"{"type":"logout","id":2}"#)
        _ = try await alice.received()
        for stream in streams[0...1] {
            let closing = try await stream.received()
            #expect(closing.last?.opcode == 0x8)
            #expect(closing.last?.closeCode == 1000)
        }
        #expect(try await streams[2].received().allSatisfy { $0.opcode != 0x8 })
        #expect(streams[2].channel.isActive)
    }

    @Test("C-7: a login whose token expired while reconnecting is refused with tokenExpired (-10009, not invalidToken) and leaves the session in its grace window; a fresh token then resumes it")
    func expiredTokenOnResume() async throws {
        let appId = "0123456789abcdef0123456789abcdef", certificate = "fedcba9876543210fedcba9876543210"
        let server = try EmbeddedServer { $0.apps = [appId: certificate] }
        let now = UInt32(Date().timeIntervalSince1970)
        func login(_ connection: EmbeddedConnection, expiring: UInt32, resumeToken: String?) async throws -> [String: Any] {
            let token = AccessToken006.buildRTMToken(appId: appId, appCertificate: certificate, userId: "alice", privilegeExpireTimestamp: expiring)
            let resume = resumeToken.map { #","resumeToken":"\#($0)""# } ?? ""
            try await connection.send(#"{"type":"login","id":1,"appId":"\#(appId)","userId":"alice","token":"\#(token)","heartbeatInterval":5,"presenceTimeout":15\#(resume)}"#)
            return try await connection.receivedJSON().first ?? [:]
        }
        let first = try await server.connect()
        let ok = try await login(first, expiring: now + 3600, resumeToken: nil)
        let resumeToken = try #require(ok["resumeToken"] as? String)
        try await first.send(#"{"type":"subscribe","id":2,"channel":"room"}"#)
        _ = try await first.received()
        try await first.close()   // the link is lost: the grace window opens (the embedded loop's time never reaches its end)
        #expect(server.hub.sessionCount == 1)

        let expired = try await server.connect()
        let refused = try await login(expired, expiring: now - 10, resumeToken: resumeToken)
        #expect(refused["type"] as? String == "error" && refused["id"] as? Int == 1)
        #expect(refused["code"] as? Int == RTMErrorCode.tokenExpired.rawValue)
        #expect(server.hub.sessionCount == 1 && server.hub.members(appId: appId, channel: "room") == ["alice"])

        let renewed = try await server.connect()
        let resumed = try await login(renewed, expiring: now + 3600, resumeToken: resumeToken)
        #expect(resumed["type"] as? String == "ok" && resumed["resumed"] as? Bool == true)
        #expect(resumed["users"] as? [String] == ["room"])
    }

    @Test("H-2, P-1: the client's heartbeat and presence timeout are clamped (5–1800 s, 5–300 s) and the server's read timeout is the heartbeat plus the slack (serverTimeout)")
    func clampedHeartbeat() async throws {
        let server = try EmbeddedServer { $0.heartbeatSlack = .seconds(10) }
        for (user, heartbeat, expected) in [("low", 1, 15), ("high", 5_000, 1_810), ("plain", 30, 40)] {
            let connection = try await server.connect()
            try await connection.send(#"{"type":"login","id":1,"appId":"app","userId":"\#(user)","token":"t","heartbeatInterval":\#(heartbeat),"presenceTimeout":1}"#)
            let ok = try await connection.receivedJSON().first ?? [:]
            #expect(ok["serverTimeout"] as? Int == expected, "heartbeat \(heartbeat): \(ok)")
            #expect(try await connection.inspect { $0.lifecycle.deadline == $0.lifecycle.lastRead + .seconds(Int64(expected)) })
        }
    }

    @Test("K-2, K-3: PCU counts logged-in MESSAGE connections and keeps their peak; STREAM connections are counted apart and never toward it; a STREAM join needs its user logged in on a MESSAGE connection")
    func connectionCounters() async throws {
        let server = try EmbeddedServer()
        let early = try await server.connect()
        try await early.send(#"{"type":"join","id":1,"appId":"app","userId":"alice","token":"t","channel":"game"}"#)
        let refused = try await early.receivedJSON().first ?? [:]
        #expect(refused["code"] as? Int == RTMErrorCode.notLogin.rawValue && refused["id"] as? Int == 1)

        let alice = try await server.connect(), bob = try await server.connect()
        try await Self.login(alice, user: "alice")
        try await Self.login(bob, user: "bob")
        let stream = try await server.connect()
        try await stream.send(#"{"type":"join","id":1,"appId":"app","userId":"alice","token":"t","channel":"game"}"#)
        #expect(try await stream.receivedJSON().first?["type"] as? String == "ok")
        var expected = ConnectionCounters()
        (expected.message, expected.stream, expected.peakMessage) = (2, 1, 2)
        #expect(server.hub.connectionCounters == expected)

        try await bob.send(#"{"type":"logout","id":2}"#)
        _ = try await bob.received()
        expected.message = 1
        #expect(server.hub.connectionCounters == expected)   // the peak stays
    }
}
