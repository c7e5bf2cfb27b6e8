import Foundation
import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMServer

/// When the server falls behind, the clients that behave are not punished for its lateness
/// (SPEC T-3, PROTOCOL §3 and §7): a ping waiting unread in the socket is not silence, and a
/// stream that kept to the publish rate but was read late in one go is not a burst. The
/// server's only event loop is held busy on purpose (a task that waits on a semaphore) while
/// the client keeps to its heartbeat and its rate, past its read deadline.
@Suite(.realTime, .serialized)
struct BusyServerTests {
    @Test("T-3: a client whose pings wait in its socket while the server's loop is busy past its read deadline stays connected; its publishes at the rate, read late in one go, are all accepted")
    func busyLoopDoesNotPunishTheBehaving() async throws {
        let harness = try await Harness.start {
            $0.threads = 1
            $0.heartbeatSlack = .milliseconds(300)
            $0.publishRatePerSecond = 10
        }
        let peer = try await RawPeer.connect(port: harness.port)
        var hello = ByteBuffer(string: RawPeer.upgradeRequest())
        hello.writeImmutableBuffer(HardeningTests.loginFrame("steady", heartbeat: 0.5))   // read deadline 0.5 + 0.3 s
        try await peer.write(hello)
        _ = await peer.framesUntilClose(within: .milliseconds(300))
        #expect(peer.frames().first?.text.contains(#""type":"ok""#) == true)

        // Hold the server's loop until the client has kept to its heartbeat and rate for 2 s.
        let release = DispatchSemaphore(value: 0)
        let loop = harness.server.hub.fanouts[0].eventLoop
        loop.execute { release.wait() }
        let started = ContinuousClock.now
        var published = 0
        while ContinuousClock.now - started < .seconds(2) {
            try await peer.write(RawPeer.text(#"{"type":"ping"}"#))
            published += 1   // 8 a second: under the limit of 10
            try await peer.write(RawPeer.text(#"{"type":"publish","id":\#(100 + published),"channel":"steady","text":"m\#(published)"}"#))
            try await Task.sleep(for: .milliseconds(125))   // pacing the client at its rate: the load is the rule
        }
        release.signal()

        // Every publish answered, none refused, and the connection still open.
        func replies() -> [Frame] {
            peer.frames().compactMap { try? FrameCodec.decode(ByteBuffer(string: $0.text)) }.filter { ($0.id ?? 0) > 100 }
        }
        _ = await eventually(within: .seconds(5)) { replies().count >= published }
        let refused = replies().filter { $0.type == .error }
        #expect(refused.isEmpty, "refused: \(refused.map { "\($0.code ?? 0) \($0.reason ?? "")" })")
        #expect(replies().count == published)
        try await peer.write(RawPeer.text(#"{"type":"ping"}"#))
        // A window in which nothing may happen (the rule is a negative: no drop).
        try await Task.sleep(for: .milliseconds(100))   // the window of the negative rule: no drop in it
        #expect(!peer.isClosed, "the server dropped a client that kept to its heartbeat")
        await peer.close()
    }
}
