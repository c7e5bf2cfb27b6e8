import NIOCore
import RTMProtocol
import Testing
@testable import RTMClient

/// Pure-value tests of the link state machine: one event in, the expected actions out.
/// Times are synthetic (`t(seconds)`); no clock, no sockets.
struct LinkStateMachineTests {
    typealias M = LinkStateMachine

    static func t(_ seconds: Double) -> NIODeadline { .uptimeNanoseconds(UInt64(1_000_000_000_000 + seconds * 1e9)) }

    static func machine(reconnectTimeout: Double = 0) -> M {
        var timing = M.Timing()
        timing.reconnectTimeout = reconnectTimeout
        return M(timing: timing, seed: 42)
    }

    /// A machine logged in at t=0 on attempt 1.
    static func connected() -> M {
        var m = machine()
        _ = m.login(now: t(0))
        _ = m.loginSucceeded(attempt: 1, resumed: false, now: t(0.1))
        return m
    }

    static func links(_ actions: [M.Action]) -> [M.Transition] {
        actions.compactMap { if case .link(let t) = $0 { t } else { nil } }
    }

    static func classics(_ actions: [M.Action]) -> [ConnectionState] {
        actions.compactMap { if case .classic(let s, _) = $0 { s } else { nil } }
    }

    static func scheduled(_ actions: [M.Action], _ timer: M.Timer) -> NIODeadline? {
        actions.compactMap { if case .schedule(timer, let at) = $0 { at } else { nil } }.last
    }

    static func opens(_ actions: [M.Action]) -> [UInt64] {
        actions.compactMap { if case .openConnection(let a, _) = $0 { a } else { nil } }
    }

    // MARK: C-1

    @Test("C-1: login moves idle → connecting (reason login), then connected (loginSuccess)")
    func loginSucceeds() {
        var m = Self.machine()
        let a = m.login(now: Self.t(0))
        #expect(Self.links(a).map(\.current) == [.connecting])
        #expect(a.contains(.classic(.connecting, .login)))
        #expect(Self.opens(a) == [1])
        #expect(Self.scheduled(a, .loginDeadline) == Self.t(12))
        let b = m.loginSucceeded(attempt: 1, resumed: false, now: Self.t(0.2))
        #expect(Self.links(b).first == M.Transition(previous: .connecting, current: .connected, operation: .login, reason: .loginSuccess, message: "logged in"))
        #expect(b.contains(.classic(.connected, .loginSuccess)))
        #expect(b.contains(.completeLogin(nil)))
        #expect(b.contains(.cancel(.loginDeadline)))
        #expect(Self.scheduled(b, .heartbeat) == Self.t(5.2))
        #expect(m.linkState == .connected && m.classic == .connected)
    }

    @Test("C-1: not logged in within the login timeout → failed/loginTimeout, classic disconnected/loginTimeout")
    func loginTimeout() {
        var m = Self.machine()
        _ = m.login(now: Self.t(0))
        let a = m.timerFired(.loginDeadline, due: Self.t(12), now: Self.t(12))
        #expect(Self.links(a).map(\.reason) == [.loginTimeout])
        #expect(a.contains(.classic(.disconnected, .loginTimeout)))
        #expect(a.contains { if case .completeLogin(let e?) = $0 { e.code == .loginTimeout } else { false } })
        #expect(m.linkState == .failed)
        // T-5: nothing is left scheduled that could log in again by itself.
        #expect(m.timerFired(.retry, due: Self.t(13), now: Self.t(13)).isEmpty)
    }

    @Test("C-1/T-1: a failed initial attempt retries within the login deadline without extra link events")
    func initialRetry() {
        var m = Self.machine()
        _ = m.login(now: Self.t(0))
        let a = m.connectionClosed(attempt: 1, message: "refused", now: Self.t(0.1))
        #expect(Self.links(a).isEmpty)
        let retryAt = try! #require(Self.scheduled(a, .retry))
        #expect(retryAt >= Self.t(1.1) && retryAt <= Self.t(2.1))
        let b = m.timerFired(.retry, due: retryAt, now: retryAt)
        #expect(Self.opens(b) == [2])
        #expect(m.linkState == .connecting)
        // T-1: an attempt that never answers is abandoned after the connect timeout.
        let c = m.timerFired(.attempt, due: Self.t(12), now: Self.t(11.9))
        #expect(c.contains(.closeConnection(attempt: 2, sendLogout: false)))
    }

    @Test("C-1: an invalid token fails the login: failed/invalidToken, classic disconnected/loginFailure")
    func invalidToken() {
        var m = Self.machine()
        _ = m.login(now: Self.t(0))
        let a = m.loginRejected(attempt: 1, code: .invalidToken, reason: "bad signature", now: Self.t(0.1))
        #expect(Self.links(a).map(\.current) == [.failed])
        #expect(Self.links(a).map(\.reason) == [.invalidToken])
        #expect(a.contains(.classic(.disconnected, .loginFailure)))
        #expect(Self.opens(a).isEmpty)
    }

    // MARK: C-2

    @Test("C-2/K-4: logout from connected → idle, classic disconnected/logout, every timer cancelled, caches cleared")
    func logoutFromConnected() {
        var m = Self.connected()
        let a = m.logout(now: Self.t(1))
        #expect(Self.links(a).map(\.current) == [.idle])
        #expect(a.contains(.classic(.disconnected, .logout)))
        for timer in M.Timer.allCases { #expect(a.contains(.cancel(timer))) }
        #expect(a.contains(.closeConnection(attempt: 1, sendLogout: true)))
        #expect(a.contains(.clearCaches))
    }

    @Test("C-2: logout from disconnected, suspended, connecting and failed all end idle")
    func logoutFromAnyState() {
        var waiting = Self.connected()
        _ = waiting.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))
        #expect(Self.links(waiting.logout(now: Self.t(2))).map(\.current) == [.idle])
        var connecting = Self.machine()
        _ = connecting.login(now: Self.t(0))
        let a = connecting.logout(now: Self.t(0.1))
        #expect(a.contains { if case .completeLogin(let e?) = $0 { e.code == .loginCanceled } else { false } })
        #expect(connecting.linkState == .idle)
        var kicked = Self.connected()
        _ = kicked.kicked(attempt: 1, reason: .sameUidLogin, message: "x", now: Self.t(1))
        #expect(kicked.logout(now: Self.t(2)).contains(.classic(.disconnected, .logout)))
        #expect(kicked.linkState == .idle)
    }

    // MARK: C-3, C-4, R-1

    @Test("C-3: an interruption healed within 4 s causes no classic change at all")
    func shortInterruption() {
        var m = Self.connected()
        let lost = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(10))
        #expect(Self.links(lost).map(\.current) == [.disconnected])
        #expect(Self.classics(lost).isEmpty)
        #expect(Self.scheduled(lost, .interruption) == Self.t(14))
        let retryAt = try! #require(Self.scheduled(lost, .retry))
        let retry = m.timerFired(.retry, due: retryAt, now: retryAt)
        #expect(Self.links(retry).map(\.current) == [.connecting])
        let back = m.loginSucceeded(attempt: 2, resumed: true, now: retryAt + .milliseconds(100))
        #expect(Self.classics(back).isEmpty)
        #expect(back.contains(.cancel(.interruption)))
        #expect(Self.links(back).first?.isResumed == true)
        #expect(Self.links(back).first?.operation == .reconnected)
    }

    @Test("C-3/C-4: over 4 s → classic reconnecting/interrupted; back → connected, no second login completion")
    func longInterruption() {
        var m = Self.connected()
        _ = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(10))
        let interrupted = m.timerFired(.interruption, due: Self.t(14), now: Self.t(14))
        #expect(interrupted == [.classic(.reconnecting, .interrupted)])
        _ = m.timerFired(.retry, due: Self.t(15), now: Self.t(15))
        let back = m.loginSucceeded(attempt: 2, resumed: false, now: Self.t(15.1))
        #expect(Self.classics(back) == [.connected])
        #expect(back.contains(.restore(resumed: false)))   // C-5
    }

    @Test("R-1: backoff doubles from 2 s with jitter, capped at 64 s; suspended after 2 min retries every 30 s")
    func backoffAndSuspended() {
        var m = Self.connected()
        var now = Self.t(0)
        var actions = m.connectionClosed(attempt: 1, message: "cut", now: now)
        var delays: [Double] = []
        var attempt: UInt64 = 1
        while now < Self.t(200) {
            guard let at = Self.scheduled(actions, .retry) else { Issue.record("no retry scheduled"); return }
            delays.append(Double((at - now).nanoseconds) / 1e9)
            now = at
            actions = m.timerFired(.retry, due: at, now: at)
            attempt += 1
            #expect(Self.opens(actions) == [attempt])
            actions = m.connectionClosed(attempt: attempt, message: "refused", now: now)
        }
        let bases: [Double] = [2, 4, 8, 16, 32, 64]
        for (delay, base) in zip(delays, bases) { #expect(delay >= base / 2 && delay <= base) }
        #expect(delays.contains(30))                 // suspended period
        #expect(m.linkState == .suspended)
        #expect(delays.allSatisfy { $0 <= 64 })
    }

    @Test("R-1/T-9: two machines with different seeds do not retry in lockstep")
    func jitterDiffers() {
        var a = M(timing: M.Timing(), seed: 1)
        var b = M(timing: M.Timing(), seed: 2)
        for m in [0, 1] {
            var x = m == 0 ? a : b
            _ = x.login(now: Self.t(0))
            _ = x.loginSucceeded(attempt: 1, resumed: false, now: Self.t(0))
            if m == 0 { a = x } else { b = x }
        }
        let ra = Self.scheduled(a.connectionClosed(attempt: 1, message: "", now: Self.t(1)), .retry)
        let rb = Self.scheduled(b.connectionClosed(attempt: 1, message: "", now: Self.t(1)), .retry)
        #expect(ra != rb)
    }

    @Test("isResumed is false when the link came back from suspended")
    func notResumedAfterSuspended() {
        var m = Self.connected()
        _ = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(0))
        _ = m.timerFired(.retry, due: Self.t(130), now: Self.t(130))
        _ = m.connectionClosed(attempt: 2, message: "refused", now: Self.t(130.1))
        #expect(m.linkState == .suspended)
        _ = m.timerFired(.retry, due: Self.t(160), now: Self.t(160))
        let back = m.loginSucceeded(attempt: 3, resumed: false, now: Self.t(160.1))
        #expect(Self.links(back).first?.isResumed == false)
        #expect(Self.links(back).first?.previous == .connecting)
    }

    @Test("P-1: isResumed is the server's answer: a quick return that the server answers resumed:false is not resumed")
    func isResumedFollowsTheServer() {
        var m = Self.connected()
        _ = m.connectionClosed(attempt: 1, message: "server restarted", now: Self.t(10))
        _ = m.timerFired(.retry, due: Self.t(11), now: Self.t(11))
        let back = m.loginSucceeded(attempt: 2, resumed: false, now: Self.t(11.1))
        #expect(Self.links(back).first?.isResumed == false)
        #expect(Self.links(back).first?.message == "new session")
        #expect(back.contains(.restore(resumed: false)))
    }

    // MARK: H-1, H-5, T-3, T-11

    @Test("H-1: a heartbeat sends a ping and arms a 10 s pong deadline; silence → disconnected/keepAliveTimeout")
    func heartbeatTimeout() {
        var m = Self.connected()
        let tick = m.timerFired(.heartbeat, due: Self.t(5.1), now: Self.t(5.1))
        #expect(tick.contains(.sendPing(attempt: 1)))
        #expect(Self.scheduled(tick, .pong) == Self.t(15.1))
        #expect(Self.scheduled(tick, .heartbeat) == Self.t(10.1))
        // A second tick while a ping is outstanding does not push the deadline (H-5).
        let tick2 = m.timerFired(.heartbeat, due: Self.t(10.1), now: Self.t(10.1))
        #expect(Self.scheduled(tick2, .pong) == nil)
        let dead = m.timerFired(.pong, due: Self.t(15.1), now: Self.t(15.1))
        #expect(Self.links(dead) == [M.Transition(previous: .connected, current: .disconnected, operation: .heartbeatTimeout,
                                                  reason: .keepAliveTimeout, message: "no reply to ping within 10.0 s")])
        #expect(dead.contains(.closeConnection(attempt: 1, sendLogout: false)))
    }

    @Test("T-3: any inbound frame refreshes liveness (cancels the pong deadline)")
    func inboundRefreshes() {
        var m = Self.connected()
        _ = m.timerFired(.heartbeat, due: Self.t(5.1), now: Self.t(5.1))
        #expect(m.inbound(attempt: 1, now: Self.t(6)) == [.cancel(.pong)])
        #expect(m.inbound(attempt: 1, now: Self.t(6.1)).isEmpty)
        #expect(m.inbound(attempt: 99, now: Self.t(6.2)).isEmpty)   // stale connection
    }

    @Test("T-11: after SIGSTOP/SIGCONT a stale pong timer probes again instead of killing the link")
    func lateTimerProbes() {
        var m = Self.connected()
        _ = m.timerFired(.heartbeat, due: Self.t(5.1), now: Self.t(5.1))
        // The process was stopped from t=6 to t=60: the pong timer due at 15.1 fires at 60.
        let a = m.timerFired(.pong, due: Self.t(15.1), now: Self.t(60))
        #expect(Self.links(a).isEmpty)
        #expect(a.contains(.sendPing(attempt: 1)))
        #expect(Self.scheduled(a, .pong) == Self.t(70))
        #expect(m.inbound(attempt: 1, now: Self.t(60.01)) == [.cancel(.pong)])
        #expect(m.linkState == .connected)
        // …but a dead link is still found: no answer to the fresh probe → disconnected.
        var dead = Self.connected()
        _ = dead.timerFired(.heartbeat, due: Self.t(5.1), now: Self.t(5.1))
        _ = dead.timerFired(.pong, due: Self.t(15.1), now: Self.t(60))
        #expect(Self.links(dead.timerFired(.pong, due: Self.t(70), now: Self.t(70))).map(\.current) == [.disconnected])
    }

    // MARK: C-6, C-7

    @Test("C-6: kicked by a same-user login → failed/serverReject/sameUidLogin, classic aborted/remoteLogin, never logs in by itself")
    func kickedNeverAutoLogin() {
        var m = Self.connected()
        let a = m.kicked(attempt: 1, reason: .sameUidLogin, message: "elsewhere", now: Self.t(1))
        #expect(Self.links(a) == [M.Transition(previous: .connected, current: .failed, operation: .serverReject, reason: .sameUidLogin, message: "elsewhere")])
        #expect(a.contains(.classic(.aborted, .remoteLogin)))
        for timer in M.Timer.allCases {
            #expect(Self.opens(m.timerFired(timer, due: Self.t(100), now: Self.t(100))).isEmpty)
        }
        #expect(Self.opens(m.networkChanged(available: true, now: Self.t(101))).isEmpty)
        let again = m.login(now: Self.t(102))
        #expect(again.count == 1)
        #expect(again.contains { if case .completeLogin(let e?) = $0 { e.code == .loginAborted } else { false } })
    }

    @Test("C-7: token expired while reconnecting → event, failed/serverReject/tokenExpired, no classic change; renewal resumes")
    func tokenExpiredWhileReconnecting() {
        var m = Self.connected()
        _ = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))
        _ = m.timerFired(.interruption, due: Self.t(5), now: Self.t(5))
        _ = m.timerFired(.retry, due: Self.t(6), now: Self.t(6))
        let a = m.loginRejected(attempt: 2, code: .tokenExpired, reason: "expired", now: Self.t(6.1))
        #expect(a.contains(.tokenExpired))
        #expect(Self.classics(a).isEmpty)
        #expect(Self.links(a).map(\.reason) == [.tokenExpired])
        #expect(Self.links(a).map(\.operation) == [.serverReject])
        #expect(m.classic == .reconnecting)
        let b = m.tokenRenewed(now: Self.t(7))
        #expect(Self.opens(b) == [3])
        let c = m.loginSucceeded(attempt: 3, resumed: true, now: Self.t(7.1))
        #expect(Self.classics(c) == [.connected])
    }

    // MARK: R-2, T-4, T-9, T-10, L-1

    @Test("R-2/T-4: no retries while the network is down; network back → immediate attempt (networkChange)")
    func networkSignal() {
        var m = Self.connected()
        _ = m.networkChanged(available: false, now: Self.t(0.5))
        let lost = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))
        #expect(Self.scheduled(lost, .retry) == nil)
        let back = m.networkChanged(available: true, now: Self.t(30))
        #expect(Self.opens(back) == [2])
        #expect(Self.links(back).map(\.operation) == [.networkChange])
    }

    @Test("T-4: login() while disconnected cuts the backoff short")
    func loginForcesRetry() {
        var m = Self.connected()
        _ = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))
        let a = m.login(now: Self.t(1.5))
        #expect(a.contains(.cancel(.retry)))
        #expect(Self.opens(a) == [2])
    }

    @Test("T-9: a 'retry later' login answer backs off instead of failing")
    func admissionControl() {
        var m = Self.connected()
        _ = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))
        _ = m.timerFired(.retry, due: Self.t(2), now: Self.t(2))
        let a = m.loginRejected(attempt: 2, code: .loginNoServerResources, reason: "busy", now: Self.t(2.1))
        #expect(m.linkState == .disconnected)
        #expect(Self.scheduled(a, .retry) != nil)
        #expect(Self.links(a).map(\.reason) == [.loginTooFrequent])
    }

    @Test("T-10: a lost link never reconnects from the close path: only the retry timer opens a connection")
    func noReconnectFromClose() {
        var m = Self.connected()
        #expect(Self.opens(m.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))).isEmpty)
        var h = Self.connected()
        _ = h.timerFired(.heartbeat, due: Self.t(5), now: Self.t(5))
        #expect(Self.opens(h.timerFired(.pong, due: Self.t(15), now: Self.t(15))).isEmpty)
    }

    @Test("L-1: reconnectTimeout bounds reconnection: failed/reconnectTimeout")
    func reconnectTimeout() {
        var m = Self.machine(reconnectTimeout: 15)
        _ = m.login(now: Self.t(0))
        _ = m.loginSucceeded(attempt: 1, resumed: false, now: Self.t(0))
        let lost = m.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))
        #expect(Self.scheduled(lost, .reconnectDeadline) == Self.t(16))
        let a = m.timerFired(.reconnectDeadline, due: Self.t(16), now: Self.t(16))
        #expect(Self.links(a).map(\.reason) == [.reconnectTimeout])
        #expect(m.linkState == .failed)
    }

    @Test("C-8: a whole cut-and-return run reports every classic change once, in order")
    func classicSequence() {
        var m = Self.machine()
        var all: [M.Action] = []
        all += m.login(now: Self.t(0))
        all += m.loginSucceeded(attempt: 1, resumed: false, now: Self.t(0.1))
        all += m.connectionClosed(attempt: 1, message: "cut", now: Self.t(1))
        all += m.timerFired(.interruption, due: Self.t(5), now: Self.t(5))
        all += m.timerFired(.retry, due: Self.t(6), now: Self.t(6))
        all += m.loginSucceeded(attempt: 2, resumed: true, now: Self.t(6.1))
        all += m.logout(now: Self.t(7))
        #expect(Self.classics(all) == [.connecting, .connected, .reconnecting, .connected, .disconnected])
        let states = Self.links(all)
        #expect(states.map(\.current) == [.connecting, .connected, .disconnected, .connecting, .connected, .idle])
        for (a, b) in zip(states, states.dropFirst()) { #expect(a.current == b.previous) }
    }
}
