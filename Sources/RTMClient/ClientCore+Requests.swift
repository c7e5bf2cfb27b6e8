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
        var request = Request(frame: frame, operation: operation, promise: promise, timeout: nil, isInternal: isInternal)
        let timeout = timeout ?? config.requestTimeout
        request.timeout = timeout.isFinite ? loop.scheduleTask(in: .fractionalSeconds(timeout)) { [self] in
            guard let request = requests.removeValue(forKey: id) else { return }
            sent.remove(id)
            queued.removeAll { $0 == id }
            request.promise.fail(RTMError(timeoutCode, operation: operation, "no reply within \(timeout) s (link state \(machine.linkState))"))
        } : nil
        requests[id] = request
        if machine.isConnected, let channel = connection?.channel {
            sent.insert(id)
            ClientTransport.send(frame, on: channel)
        } else {
            queued.append(id)
        }
        return promise.futureResult
    }

    /// A reply to request `id`.
    func reply(_ frame: Frame, id: UInt64) {
        guard let request = requests.removeValue(forKey: id) else { return }
        sent.remove(id)
        request.timeout?.cancel()
        if frame.type == .ok {
            request.promise.succeed(frame)
        } else {
            let code = RTMErrorCode(rawValue: frame.code ?? RTMErrorCode.invalidFrame.rawValue)
            request.promise.fail(RTMError(code, operation: request.operation, frame.reason ?? "rejected by the server"))
        }
    }

    /// Sends every queued request, oldest first.
    func flushQueue() {
        guard machine.isConnected, let channel = connection?.channel else { return }
        while let id = queued.popFirst() {
            guard let request = requests[id] else { continue }
            sent.insert(id)
            ClientTransport.send(request.frame, on: channel)
        }
    }

    /// The connection died with requests unanswered: send them again after the reconnection
    /// (their timeouts keep running). Internal ones are dropped: restore runs again anyway.
    func requeueSent() {
        let unanswered = requests.filter { sent.contains($0.key) }.keys.sorted()
        sent.removeAll()
        var again: [UInt64] = []
        for id in unanswered {
            guard let request = requests[id] else { continue }
            if request.isInternal {
                requests[id] = nil
                request.timeout?.cancel()
                request.promise.fail(RTMError(.notConnected, operation: request.operation, "connection lost"))
            } else {
                again.append(id)
            }
        }
        queued.insert(contentsOf: again, at: 0)
    }

    func failAll(_ error: RTMError) {
        let all = requests
        requests = [:]
        queued = []
        sent = []
        for request in all.values.sorted(by: { ($0.frame.id ?? 0) < ($1.frame.id ?? 0) }) {
            request.timeout?.cancel()
            request.promise.fail(RTMError(error.code, operation: request.operation, error.reason))
        }
    }

    // MARK: restore (C-5)

    /// Logged in again: re-subscribe what the server does not already have, then send the queue.
    func restore(resumed: Bool) {
        let kept = resumed ? Set(serverChannels) : []
        let missing = subscriptions.filter { !kept.contains($0) }
        if !resumed { restoreMetadataWatches() }
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
