import NIOCore
import RTMProtocol
import Testing
@testable import RTMClient

/// Pure-value tests of a stream channel's link machine (SPEC K-3, H-3, §2.1): events in,
/// actions out; synthetic times.
struct StreamLinkMachineTests {
    typealias M = StreamLinkMachine

    static func t(_ seconds: Double) -> NIODeadline { .uptimeNanoseconds(UInt64(1_000_000_000_000 + seconds * 1e9)) }

    static func links(_ actions: [M.Action]) -> [LinkStateMachine.Transition] {
        actions.compactMap { if case .link(let t) = $0 { t } else { nil } }
    }

    static func joined() -> M {
        var m = M(timing: M.Timing(), seed: 7)
        _ = m.join()
        _ = m.joined(attempt: 1)
        return m
    }

    @Test("join: idle → connecting (join) → connected (joinSuccess), pings every 0.5 s, join completes")
    func joinFlow() {
        var m = M(timing: M.Timing(), seed: 7)
        let a = m.join()
        #expect(Self.links(a).map(\.current) == [.connecting])
        #expect(a.contains(.open(attempt: 1)))
        #expect(m.join().isEmpty)   // joining twice does nothing
        let b = m.joined(attempt: 1)
        #expect(Self.links(b).map { [$0.current.rawValue, $0.reason.rawValue] } == [[LinkState.connected.rawValue, LinkStateChangeReason.joinSuccess.rawValue]])
        #expect(b.contains(.schedule(.heartbeat, after: 0.5)))
        #expect(b.contains(.completeJoin(nil)))
    }

    @Test("H-3: no reply within 1 s of a ping → connecting (heartbeatTimeout/keepAliveTimeout), rejoin at once, topics restored")
    func heartbeatLoss() {
        var m = Self.joined()
        let ping = m.timerFired(.heartbeat, now: Self.t(0.5))
        #expect(ping.contains(.sendPing(attempt: 1)))
        #expect(ping.contains(.schedule(.pong, after: 1)))
        // A frame arriving clears the probe.
        #expect(m.inbound(attempt: 1) == [.cancel(.pong)])
        _ = m.timerFired(.heartbeat, now: Self.t(1.0))
        let lost = m.timerFired(.pong, now: Self.t(2.0))
        #expect(Self.links(lost).map(\.operation) == [.heartbeatTimeout])
        #expect(Self.links(lost).map(\.reason) == [.keepAliveTimeout])
        #expect(lost.contains(.close(attempt: 1, sendLeave: false)))
        #expect(lost.contains(.schedule(.retry, after: 0)))
        let retry = m.timerFired(.retry, now: Self.t(2.0))
        #expect(retry.contains(.open(attempt: 2)))
        let back = m.joined(attempt: 2)
        #expect(Self.links(back).map(\.operation) == [.reconnected])
        #expect(Self.links(back).map(\.reason) == [.rejoin])
        #expect(back.contains(.restoreTopics))
        #expect(!back.contains(.completeJoin(nil)))
    }

    @Test("§2.1: rejoining gives up after 20 minutes → failed (joinFailed)")
    func rejoinWindow() {
        var m = Self.joined()
        _ = m.connectionClosed(attempt: 1, message: "reset", now: Self.t(10))
        var attempt: UInt64 = 2
        var now = 10.0
        var failed: [LinkStateMachine.Transition] = []
        while failed.isEmpty && now < 2000 {
            _ = m.timerFired(.retry, now: Self.t(now))
            now += 30
            failed = Self.links(m.connectionClosed(attempt: attempt, message: "refused", now: Self.t(now))).filter { $0.current == .failed }
            attempt += 1
        }
        #expect(failed.map(\.reason) == [.joinFailed])
        #expect(now >= 10 + 1200)
        #expect(m.linkState == .failed)
    }

    @Test("A first join that fails (or is refused) fails at once; a fatal refusal (token) fails a rejoin too")
    func joinFailures() {
        var m = M(timing: M.Timing(), seed: 7)
        _ = m.join()
        let refused = m.joinRejected(attempt: 1, code: .notLogin, reason: "not logged in", now: Self.t(0))
        #expect(m.linkState == .failed)
        #expect(refused.contains { if case .completeJoin(let e?) = $0 { e.code == .channelJoinFailed } else { false } })
        var n = Self.joined()
        _ = n.connectionClosed(attempt: 1, message: "reset", now: Self.t(1))
        _ = n.timerFired(.retry, now: Self.t(1))
        let expired = n.joinRejected(attempt: 2, code: .tokenExpired, reason: "expired", now: Self.t(1.1))
        #expect(Self.links(expired).map { $0.operation } == [.serverReject])
        #expect(Self.links(expired).map { $0.reason } == [.tokenExpired])
    }

    @Test("K-4/H-4: leave and logout go to idle at once, closing with a leave frame")
    func leaveAndLogout() {
        var m = Self.joined()
        let left = m.leave(logout: false)
        #expect(left.contains(.close(attempt: 1, sendLeave: true)))
        #expect(Self.links(left).map(\.operation) == [.leave])
        #expect(m.linkState == .idle)
        var n = Self.joined()
        #expect(Self.links(n.leave(logout: true)).map(\.operation) == [.logout])
        #expect(n.leave(logout: true).isEmpty)
    }
}
