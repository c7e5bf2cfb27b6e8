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
    private var watched: [ObjectIdentifier: ConnectionHandler] = [:]
    /// The loop's ticks (counted once the server installs them in its group's metrics
    /// delegate; until then, and on loops without it, a passed deadline is acted on at once).
    let ticks = LoopTicks()
    /// Passed deadlines waiting for an I/O pass to confirm them.
    private var suspects = DeadlineSuspects<ObjectIdentifier>()
    private var confirmScheduled = false

    /// Starts checking every `interval` (a deadline is acted on at most this late, plus the
    /// time the loop takes to go round its sockets once).
    init(eventLoop: any EventLoop, interval: TimeAmount) {
        self.eventLoop = eventLoop
        let interval = max(interval, .milliseconds(1))
        eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in self?.sweep() }
    }

    /// Connections watched (tests check that closed ones leave).
    var count: Int { watched.count }

    /// Watches a connection until `unwatch`.
    func watch(_ handler: ConnectionHandler) {
        eventLoop.assertInEventLoop()
        watched[ObjectIdentifier(handler)] = handler
    }

    /// Stops watching a connection (closed).
    func unwatch(_ handler: ConnectionHandler) {
        eventLoop.assertInEventLoop()
        watched.removeValue(forKey: ObjectIdentifier(handler))
        suspects.clear(ObjectIdentifier(handler))
    }

    /// Looks at the connections whose state changed since the last look, or whose deadline or
    /// silence threshold (`ServerConnectionStateMachine.nextCheck`) came: the profile of 15,000
    /// idle clients had the loops spend a third of their time reading every connection's state
    /// four times a second.
    private func sweep() {
        let now = NIODeadline.now()
        var due: [ConnectionHandler] = []
        for (id, handler) in watched {
            if let check = handler.livenessCheck, now < check { continue }
            if Self.isDue(handler, now: now), confirmed(id) { due.append(handler) }
            if handler.lifecycle.isLoggedIn { handler.checkSilence(now: now) }   // peer online status (§1.7)
            handler.livenessCheck = handler.lifecycle.nextCheck
        }
        settle(now: now, due: due)
    }

    /// Re-checks the suspects only, soon after a sweep marked some.
    private func confirm() {
        confirmScheduled = false
        let now = NIODeadline.now()
        var due: [ConnectionHandler] = []
        for id in suspects.ids {
            if let handler = watched[id], Self.isDue(handler, now: now), confirmed(id) { due.append(handler) }
        }
        settle(now: now, due: due)
    }

    /// The connection's deadline has passed.
    private static func isDue(_ handler: ConnectionHandler, now: NIODeadline) -> Bool {
        handler.deadline.map { $0 <= now } ?? false
    }

    /// Whether `id`'s passed deadline is confirmed (at once on a loop whose ticks are not observed).
    private func confirmed(_ id: ObjectIdentifier) -> Bool {
        guard ticks.observed else { return true }
        return suspects.passed(id, completedTicks: ticks.completed)
    }

    /// Drops the suspects whose deadline moved (a frame came) or that closed, acts on the due
    /// ones, and comes back soon while suspects remain.
    private func settle(now: NIODeadline, due: [ConnectionHandler]) {
        for id in suspects.ids where !(watched[id].map { Self.isDue($0, now: now) } ?? false) { suspects.clear(id) }
        for handler in due { handler.deadlinePassed(now: now) }
        if !suspects.isEmpty && !confirmScheduled {
            confirmScheduled = true
            eventLoop.scheduleTask(in: .milliseconds(1)) { [weak self] in self?.confirm() }
        }
    }
}
