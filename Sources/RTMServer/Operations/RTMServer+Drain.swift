import NIOCore
import RTMProtocol

extension RTMServer {
    /// Drains the server (SIGTERM and ServiceLifecycle's graceful shutdown do this
    /// before `shutdown()`):
    ///
    /// 1. `/ready` answers 503 and new WebSocket upgrades are refused (503 with `Retry-After`),
    ///    so load balancers and clients go to other nodes; `/health` and `/metrics` still answer;
    /// 2. every connected client is sent a `goaway` frame (reason `"server draining"`, with
    ///    `reconnectDelay`, the spread over which it should come back) and close 1001, in paced
    ///    batches of `drainRate × drainBatchInterval` (default 1,000 clients a second), so the
    ///    fleet does not reconnect in one spike. Sessions keep their grace window (SPEC P-1): a
    ///    client that resumes elsewhere in time is seen by nobody to leave or join;
    /// 3. returns when every client is gone, or after `drainTimeout`.
    ///
    /// Call `shutdown()` afterwards to stop the server (it closes whatever is left). Calling
    /// `drain()` again while a drain runs returns at once.
    public func drain() async {
        let hub = self.hub
        let first = hub.startDraining()
        guard first else { return }
        let config = configuration
        var pacer = DrainPacer(rate: max(config.drainRate, 0.001), interval: max(config.drainBatchInterval, .milliseconds(1)))
        let spread = max(config.drainReconnectSpread, .zero)
        let goAway = Frame(type: .goAway, code: LinkStateChangeReason.kickedOutByServer.rawValue, reason: "server draining")
            .with { $0.reconnectDelay = spread.nanoseconds / 1_000_000 }
        let started = NIODeadline.now()
        let deadline = started + config.drainTimeout
        logger.info("draining", metadata: ["connections": "\(hub.openConnectionCount)", "rate": "\(config.drainRate)/s"])
        var next = started
        while true {
            let open = hub.openConnections
            if open.isEmpty { break }
            let now = NIODeadline.now()
            if now >= deadline {
                logger.warning("drain timeout: closing the remaining connections", metadata: ["connections": "\(open.count)"])
                break
            }
            let batch = Set(pacer.tick(open: open.map(\.id)))
            if !batch.isEmpty {
                for connection in open where batch.contains(connection.id) {
                    Hub.close(connection, with: goAway, code: .goingAway, reason: "server draining")
                }
                hub.metrics.sentGoAways(batch.count)
            }
            // Ticks on a fixed schedule (a slow tick does not slow the pace down).
            next = next + pacer.interval
            let wait = min(next, deadline) - NIODeadline.now()
            if wait > .zero {
                do { try await Task.sleep(nanoseconds: UInt64(wait.nanoseconds)) } catch { break }
            }
        }
        let seconds = Double((NIODeadline.now() - started).nanoseconds) / 1e9
        logger.info("drained", metadata: ["goaways": "\(pacer.sentCount)", "seconds": "\(seconds)"])
    }
}
