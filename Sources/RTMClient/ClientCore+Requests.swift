import NIOCore
import RTMProtocol

extension ClientCore {
    func takeRequestID() -> UInt64 {
        defer { nextRequestID += 1 }
        return nextRequestID
    }

    /// Sends a request now, or queues it while the link is not up. It fails with
    /// `timeoutCode` if no reply arrives within the request timeout, queued time included.
    /// `timeout` overrides the configured request timeout (`.infinity`: none, for a wait the
    /// server ends, like acquireLock with retry).
    func request(_ frame: Frame, operation: String, timeoutCode: RTMErrorCode = .requestTimeout, isInternal: Bool = false,
                 timeout: Double? = nil) -> EventLoopFuture<Frame> {
        loop.assertInEventLoop()
        let promise = loop.makePromise(of: Frame.self)
        switch machine.linkState {
        case .idle:
            promise.fail(RTMError(.notLogin, operation: operation, "not logged in: call login() first"))
            return promise.futureResult
        case .failed where machine.isAborted:
            promise.fail(RTMError(.loginAborted, operation: operation, "kicked out; call logout() then login()"))
            return promise.futureResult
        default:
            break
        }
        let id = takeRequestID()
        var frame = frame
        frame.id = id
        var request = PendingRequests.Request(frame: frame, operation: operation, promise: promise, isInternal: isInternal)
        let timeout = timeout ?? config.requestTimeout
        request.timeout = timeout.isFinite ? loop.scheduleTask(in: .fractionalSeconds(timeout)) { [self] in
            guard let request = requests.remove(id) else { return }
            let last = request.lastRefusal.map { "; last refused: \($0)" } ?? ""
            request.promise.fail(RTMError(timeoutCode, operation: operation,
                                          "no reply within \(timeout) s (link state \(machine.linkState))\(last)"))
        } : nil
        // Behind the application's queued requests, never ahead of them (M-3: one publisher's
        // order), e.g. a publish waiting to be sent again after a cluster's refusal.
        let channel = machine.isConnected ? connection?.channel : nil
        if requests.admit(request, id: id, connected: channel != nil), let channel { ClientTransport.send(frame, on: channel) }
        return promise.futureResult
    }

    /// A reply to request `id`. A publish the server could not commit to its cluster's
    /// database is sent again instead (`resendsRefusal`).
    func reply(_ frame: Frame, id: UInt64) {
        guard var request = requests.take(id) else { return }
        guard Self.resendsRefusal(frame, of: request.frame) else {
            PendingRequests.complete(request, with: frame)
            return
        }
        // SPEC M-3, R-3: sent again with the same msgId after a pause, until acknowledged or
        // until the request's own timeout (which keeps running) fails it with the last reason.
        // The server recognises the resend whatever happened to the earlier attempt, so the
        // application sees one publish, acknowledged once, and one copy is delivered.
        let delay = PendingRequests.resendDelay(after: request.refusals)
        request.refusals += 1
        request.lastRefusal = frame.reason
        requests.requeue(request, id: id)
        loop.scheduleTask(in: delay) { [self] in flushQueue() }
    }

    /// Whether the SDK sends a refused request again by itself: a channel publish with a
    /// message id refused with -11026 `channelPublishMessageTimeout`, which a server sends only
    /// when a cluster's commit did not succeed ("nothing was stored; retry later", "this node
    /// was declared dead…: reconnect and resend", or "the outcome is unknown; resend with the
    /// same msgId", PROTOCOL §5). Every other refusal fails the request.
    static func resendsRefusal(_ reply: Frame, of request: Frame) -> Bool {
        reply.type == .error && reply.code == RTMErrorCode.channelPublishMessageTimeout.rawValue
            && request.type == .publish && request.msgId != nil
    }

    /// Sends every queued request, oldest first.
    func flushQueue() {
        guard machine.isConnected, let channel = connection?.channel else { return }
        for frame in requests.dequeue() { ClientTransport.send(frame, on: channel) }
    }

    /// The connection died with requests unanswered: send them again after the reconnection
    /// (their timeouts keep running). Internal ones are dropped: restore runs again anyway.
    func requeueSent() {
        PendingRequests.fail(requests.requeueSent(), RTMError(.notConnected, operation: "request", "connection lost"))
    }

    func failAll(_ error: RTMError) {
        PendingRequests.fail(requests.takeSent(all: true), error)
    }

    // MARK: restore (C-5)

    /// Logged in again: re-subscribe what the server does not already have, then send the queue.
    func restore(resumed: Bool) {
        let kept = resumed ? Set(serverChannels) : []
        let missing = subscriptions.filter { !kept.contains($0) }
        if !resumed { restoreMetadataWatches() }
        restorePeerSubscriptions()   // also reports the changes missed meanwhile (§1.7)
        restoreInvitations()   // live invitations catch up (§1.8)
        flushQueue()
        guard !missing.isEmpty else { return }
        restoring = (missing.count, [])
        for channel in missing {
            let options = subscriptionOptions[channel] ?? SubscribeOptions()
            request(options.frame(channel).with { $0.positions = positions(for: [channel]) }, operation: "subscribe", isInternal: true)
                .whenComplete { [self] result in
                    if case .success(let reply) = result {
                        noteSubscribed(channel, reply: reply)
                        reapplyState(channel)   // a new session lost it (P-3)
                    }
                    guard var state = restoring else { return }
                    state.remaining -= 1
                    if case .failure = result {
                        state.unrestored.append(channel)
                        subscriptions.removeAll { $0 == channel }
                    }
                    restoring = state
                    if state.remaining == 0 { finishRestore() }
                }
        }
    }

    /// Ends a restore (done, or cut short by a closing connection) and releases held events.
    func finishRestore() {
        guard let state = restoring else { return }
        restoring = nil
        var unrestored = state.unrestored
        if state.remaining > 0 {
            // Cut short: the ones still pending were not restored on this connection.
            unrestored = subscriptions.filter { !serverChannels.contains($0) && !state.unrestored.contains($0) } + state.unrestored
        }
        let actions = held
        held = []
        for action in actions {
            if case .link(let transition) = action {
                emit(.linkState(makeEvent(transition, unrestored: unrestored)))
            } else {
                run([action])
            }
        }
    }
}
