import NIOCore

extension Hub {
    /// `GET /metrics`: takes every event loop's traffic counts (one hop to each, the counts read
    /// and reset on their own loop), folds them into the metrics, sets the gauges from the
    /// server's state, and renders the Prometheus text. The future completes on `loop`.
    func scrape(on loop: any EventLoop) -> EventLoopFuture<String> {
        let taken = fanouts.map { fanout in fanout.eventLoop.submit { fanout.stats.take() } }
        let mailboxDepth = loop.makePromise(of: Int.self)
        mailbox.queueDepth(mailboxDepth)
        return EventLoopFuture.whenAllSucceed(taken, on: loop).and(mailboxDepth.futureResult).map { [self] stats, depth in
            for loopStats in stats { metrics.fold(loopStats) }
            let counts = connectionCounters
            metrics.set(.messageConnections, counts.message)
            metrics.set(.streamConnections, counts.stream)
            metrics.set(.peakMessageConnections, counts.peakMessage)
            metrics.set(.webSocketConnections, openConnectionCount)
            metrics.set(.sessions, sessionCount)
            metrics.set(.mailboxQueue, depth)
            metrics.set(.storageQueue, storage.queueDepth)
            metrics.set(.draining, isDraining ? 1 : 0)
            return metrics.render()
        }
    }
}
