import NIOCore

/// The read deadlines of the connections on one event loop (SPEC H-2, H-3, H-5), checked by one
/// repeated task every `interval` instead of a timer per connection: with tens of thousands of
/// idle connections, per-connection timers kept the loop busy re-arming and sorting them.
/// A connection is due once nothing has arrived for its timeout (`lastRead` is stamped by the
/// connection on every read); it is then dropped from the table and told once.
///
/// Confined to its event loop: every method must be called on it.
final class LoopLiveness: @unchecked Sendable {
    private struct Entry {
        let handler: ConnectionHandler
        let timeout: TimeAmount
    }

    private let eventLoop: any EventLoop
    private var watched: [UInt64: Entry] = [:]

    /// Starts checking every `interval` (the detection delay is at most the timeout plus this).
    init(eventLoop: any EventLoop, interval: TimeAmount) {
        self.eventLoop = eventLoop
        let interval = max(interval, .milliseconds(1))
        eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in self?.sweep() }
    }

    /// Watches a connection: it is due after `timeout` without a read (replaces an earlier watch).
    func watch(_ handler: ConnectionHandler, id: UInt64, timeout: TimeAmount) {
        eventLoop.assertInEventLoop()
        watched[id] = Entry(handler: handler, timeout: timeout)
    }

    /// Stops watching a connection (closed).
    func unwatch(_ id: UInt64) {
        eventLoop.assertInEventLoop()
        watched.removeValue(forKey: id)
    }

    private func sweep() {
        let now = NIODeadline.now()
        var due: [(UInt64, ConnectionHandler)] = []
        for (id, entry) in watched where entry.handler.lastRead + entry.timeout <= now {
            due.append((id, entry.handler))
        }
        for (id, handler) in due {
            watched.removeValue(forKey: id)
            handler.readTimedOut()
        }
    }
}
