import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The deadlines of the database calls in flight (`BoundedCall`), watched by one timer on one
/// event loop, armed for the earliest.
///
/// A timer per call cost two event-loop wake-ups per call (scheduling it from the calling
/// thread, then cancelling it): at a thousand commits a second that was a thousand times a
/// second each, for deadlines that almost never pass. Calls with one timeout end in the order
/// they start, so a new call's deadline is later than the armed one and costs only a table
/// entry; the timer wakes once per timeout or when a deadline passes, and re-arms for the
/// earliest still pending. The timer is touched on its loop only.
final class CallDeadlines: Sendable {
    /// The deadlines of every `BoundedCall` of the process.
    static let shared = CallDeadlines(loop: MultiThreadedEventLoopGroup.singleton.any())

    private struct Call {
        let deadline: NIODeadline
        let expire: @Sendable () -> Void
    }

    private struct State {
        var nextToken: UInt64 = 0
        var calls: [UInt64: Call] = [:]
        /// The armed timer (set and cleared on `loop` only).
        var timer: (deadline: NIODeadline, task: Scheduled<Void>)?
        /// A re-arm is queued on `loop`.
        var rearming = false
    }

    private let loop: any EventLoop
    private let state = NIOLockedValueBox(State())

    init(loop: any EventLoop) {
        self.loop = loop
    }

    /// Watches a call: `expire` runs on the loop once `deadline` has passed, unless `remove` came
    /// first. Returns the call's token.
    func add(deadline: NIODeadline, expire: @escaping @Sendable () -> Void) -> UInt64 {
        let (token, rearm) = state.withLockedValue { state -> (UInt64, Bool) in
            state.nextToken &+= 1
            state.calls[state.nextToken] = Call(deadline: deadline, expire: expire)
            let armedInTime = state.timer.map { $0.deadline <= deadline } ?? false
            guard !armedInTime && !state.rearming else { return (state.nextToken, false) }
            state.rearming = true
            return (state.nextToken, true)
        }
        if rearm { loop.execute { self.rearm() } }
        return token
    }

    /// The call ended: its deadline no longer matters (the timer is left as it is; armed for
    /// this call, it wakes once and re-arms for the next).
    func remove(_ token: UInt64) {
        state.withLockedValue { _ = $0.calls.removeValue(forKey: token) }
    }

    /// Calls in flight (for tests).
    var pending: Int { state.withLockedValue { $0.calls.count } }

    /// On `loop`: the timer armed for the earliest deadline, if it is not already.
    private func rearm() {
        let (stale, next) = state.withLockedValue { state -> (Scheduled<Void>?, NIODeadline?) in
            state.rearming = false
            guard let earliest = state.calls.values.lazy.map(\.deadline).min() else { return (nil, nil) }
            if let timer = state.timer, timer.deadline <= earliest { return (nil, nil) }
            defer { state.timer = nil }
            return (state.timer?.task, earliest)
        }
        stale?.cancel()
        guard let next else { return }
        let task = loop.scheduleTask(deadline: next) { self.fire() }
        state.withLockedValue { $0.timer = (next, task) }
    }

    /// On `loop`, at the armed deadline: the calls whose deadline passed expire; the timer is
    /// re-armed for the rest.
    private func fire() {
        let expired = state.withLockedValue { state -> [Call] in
            state.timer = nil
            let now = NIODeadline.now()
            let passed = state.calls.filter { $0.value.deadline <= now }
            for token in passed.keys { state.calls[token] = nil }
            return Array(passed.values)
        }
        for call in expired { call.expire() }
        rearm()
    }
}
