import NIOCore

/// The deadlines of the connections on one event loop (each connection's state decides its own:
/// login, heartbeat (SPEC H-2, H-3, H-5), close; see `ServerConnectionStateMachine`), checked by
/// one repeated task every `interval` instead of a timer per connection: with tens of thousands
/// of idle connections, per-connection timers kept the loop busy re-arming and sorting them.
/// Every connection is watched from its accept to its close. A passed deadline is acted on
/// once the loop has read every socket since it was found (`DeadlineSuspects`: when the loop is
/// late, a ping waiting in the socket is not silence); a due one is then told until it closes.
///
/// Confined to its event loop: every method must be called on it.
final class LoopLiveness: @unchecked Sendable {
    private let eventLoop: any EventLoop
    /// The watched connections, each in its own slot (nil: a free slot, reused).
    private var handlers: [ConnectionHandler?] = []
    /// By slot: before when the sweep has nothing to look at there (uptime nanoseconds of the
    /// connection's `nextCheck` as of the last look; 0: look at the next sweep; `.max`: free).
    /// The sweep reads this dense array and touches only the connections due a look: with
    /// 15,000 idle clients, walking every handler 4 times a second was the sweep's whole cost.
    private var checks: [UInt64] = []
    private var freeSlots: [Int] = []
    /// The loop's ticks (counted once the server installs them in its group's metrics
    /// delegate; until then, and on loops without it, a passed deadline is acted on at once).
    let ticks = LoopTicks()
    /// Passed deadlines waiting for an I/O pass to confirm them, by slot.
    private var suspects = DeadlineSuspects<Int>()
    private var confirmScheduled = false

    /// Starts checking every `interval` (a deadline is acted on at most this late, plus the
    /// time the loop takes to go round its sockets once).
    init(eventLoop: any EventLoop, interval: TimeAmount) {
        self.eventLoop = eventLoop
        let interval = max(interval, .milliseconds(1))
        eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in self?.sweep() }
    }

    /// Connections watched (tests check that closed ones leave).
    var count: Int { handlers.count - freeSlots.count }

    /// When the sweep looks at the connection in `slot` next, in uptime nanoseconds (0: at the
    /// next sweep); for tests.
    func nextLook(_ slot: Int) -> UInt64 { checks[slot] }

    /// Watches a connection until `unwatch`.
    func watch(_ handler: ConnectionHandler) {
        eventLoop.assertInEventLoop()
        guard handler.livenessSlot == nil else { return touch(handler.livenessSlot!) }
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            handlers[slot] = handler
            checks[slot] = 0
        } else {
            slot = handlers.count
            handlers.append(handler)
            checks.append(0)
        }
        handler.livenessSlot = slot
        handler.livenessTouched = true
    }

    /// Stops watching a connection (closed).
    func unwatch(_ handler: ConnectionHandler) {
        eventLoop.assertInEventLoop()
        guard let slot = handler.livenessSlot else { return }
        handler.livenessSlot = nil
        handler.livenessTouched = false
        handlers[slot] = nil
        checks[slot] = .max
        freeSlots.append(slot)
        suspects.clear(slot)
    }

    /// The connection in `slot` changed (its state machine may have moved its deadlines): the
    /// next sweep looks at it. Its handler tells once per look (`livenessTouched`).
    @inline(__always)
    func touch(_ slot: Int) {
        checks[slot] = 0
    }

    /// The connection in `slot` read a frame and nothing else changed since the last look: the
    /// next look is at `check` (its `nextCheck` after the read; a read only moves it later),
    /// without a look now.
    @inline(__always)
    func postpone(_ slot: Int, until check: NIODeadline?) {
        checks[slot] = check?.uptimeNanoseconds ?? 0
    }

    /// Looks at the connections whose state changed since the last look, or whose deadline or
    /// silence threshold (`ServerConnectionStateMachine.nextCheck`) came: an idle connection is
    /// looked at only when its deadline or silence threshold comes (its reads move its next look,
    /// `postpone`), not at every sweep.
    private func sweep() {
        let now = NIODeadline.now()
        let nanos = now.uptimeNanoseconds
        var due: [ConnectionHandler] = []
        for slot in checks.indices where checks[slot] <= nanos {
            guard let handler = handlers[slot] else { continue }
            if Self.isDue(handler, now: now), confirmed(slot) { due.append(handler) }
            if handler.lifecycle.isLoggedIn { handler.checkSilence(now: now) }   // peer online status (§1.7)
            // Looked at as it is now (after `checkSilence`'s changes); a connection unwatched by
            // their effects keeps its free slot's mark.
            if handler.livenessSlot == slot {
                checks[slot] = handler.lifecycle.nextCheck?.uptimeNanoseconds ?? 0
                handler.livenessTouched = false
            }
        }
        settle(now: now, due: due)
    }

    /// Re-checks the suspects only, soon after a sweep marked some.
    private func confirm() {
        confirmScheduled = false
        let now = NIODeadline.now()
        var due: [ConnectionHandler] = []
        for slot in suspects.ids {
            if let handler = handlers[slot], Self.isDue(handler, now: now), confirmed(slot) { due.append(handler) }
        }
        settle(now: now, due: due)
    }

    /// The connection's deadline has passed.
    private static func isDue(_ handler: ConnectionHandler, now: NIODeadline) -> Bool {
        handler.deadline.map { $0 <= now } ?? false
    }

    /// Whether the passed deadline of the connection in `slot` is confirmed (at once on a loop
    /// whose ticks are not observed).
    private func confirmed(_ slot: Int) -> Bool {
        guard ticks.observed else { return true }
        return suspects.passed(slot, completedTicks: ticks.completed)
    }

    /// Drops the suspects whose deadline moved (a frame came) or that closed, acts on the due
    /// ones, and comes back soon while suspects remain.
    private func settle(now: NIODeadline, due: [ConnectionHandler]) {
        for slot in suspects.ids where !(handlers[slot].map { Self.isDue($0, now: now) } ?? false) { suspects.clear(slot) }
        for handler in due { handler.deadlinePassed(now: now) }
        if !suspects.isEmpty && !confirmScheduled {
            confirmScheduled = true
            eventLoop.scheduleTask(in: .milliseconds(1)) { [weak self] in self?.confirm() }
        }
    }
}
