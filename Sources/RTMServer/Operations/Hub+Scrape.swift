import NIOCore

extension Hub {
    /// `GET /metrics`: takes every event loop's traffic counts (one hop to each, the counts read
    /// and reset on their own loop) and the webhook dispatcher's counters (from its queue),
    /// folds them into the metrics, sets the gauges from the server's state, and renders the
    /// Prometheus text with the process's figures. The future completes on `loop`.
    func scrape(on loop: any EventLoop) -> EventLoopFuture<String> {
        let taken = foldLoopStats(on: loop)
        let mailboxDepth = loop.makePromise(of: Int.self)
        mailbox.queueDepth(mailboxDepth)
        let webhookStats = loop.makePromise(of: WebhookStats?.self)
        if let webhooks { webhooks.stats { webhookStats.succeed($0) } } else { webhookStats.succeed(nil) }
        let gathered = taken.and(mailboxDepth.futureResult).and(webhookStats.futureResult)
        return gathered.map { [self] gathered, webhookStats in
            let (_, depth) = gathered
            if let webhookStats { metrics.fold(webhookStats) }
            if let authorizationHook { metrics.fold(authorizationHook.stats) }
            let counts = connectionCounters
            metrics.set(.messageConnections, counts.message)
            metrics.set(.streamConnections, counts.stream)
            metrics.set(.peakMessageConnections, counts.peakMessage)
            metrics.set(.webSocketConnections, openConnectionCount)
            metrics.set(.sessions, sessionCount)
            cluster.followed(read { $0.interest.count })   // nothing on a single node
            metrics.set(.mailboxQueue, depth)
            metrics.set(.storageQueue, storage.queueDepth)
            metrics.set(.draining, isDraining ? 1 : 0)
            return metrics.render()
        }
    }

    /// Takes every event loop's traffic counts (one hop to each, the counts read and reset on
    /// their own loop) and folds them into the metrics; completes on `loop`.
    func foldLoopStats(on loop: any EventLoop) -> EventLoopFuture<Void> {
        let taken = fanouts.map { fanout in fanout.eventLoop.submit { fanout.stats.take() } }
        return EventLoopFuture.whenAllSucceed(taken, on: loop).map { [self] stats in
            for loopStats in stats { metrics.fold(loopStats) }
        }
    }
}
