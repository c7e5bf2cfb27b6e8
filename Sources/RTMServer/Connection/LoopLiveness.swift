import NIOCore

/// The deadlines of the connections on one event loop (each connection's state decides its own:
/// login, heartbeat (SPEC H-2, H-3, H-5), close; see `ServerConnectionStateMachine`), checked by
/// one repeated task every `interval` instead of a timer per connection: with tens of thousands
/// of idle connections, per-connection timers kept the loop busy re-arming and sorting them.
/// Every connection is watched from its accept to its close; a due one is told on each sweep
/// until it closes.
///
/// Confined to its event loop: every method must be called on it.
final class LoopLiveness: @unchecked Sendable {
    private let eventLoop: any EventLoop
    private var watched: [ObjectIdentifier: ConnectionHandler] = [:]

    /// Starts checking every `interval` (a deadline is acted on at most this late).
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
    }

    private func sweep() {
        let now = NIODeadline.now()
        var due: [ConnectionHandler] = []
        for handler in watched.values {
            if let deadline = handler.deadline, deadline <= now { due.append(handler) }
            if handler.silence != nil { handler.checkSilence(now: now) }   // peer online status (§1.7)
        }
        for handler in due { handler.deadlinePassed(now: now) }
    }
}
