import NIOCore
import RTMProtocol

/// Locks (AGORA_REFERENCE §2.12) with fencing tokens. A held lock survives its owner's
/// connection loss for its TTL (counted from when the server declares the owner offline) and is
/// released at once on logout. Every acquisition returns a fencing token larger than any
/// before it: hand it to what the lock protects, so that a holder that lost the lock without
/// noticing is refused there.
extension RTMClient {
    /// Defines a lock in a channel; `ttl` in seconds, [10, 300] (default 10).
    public func setLock(channel: String, lockName: String, ttl: Int = 10) async throws(RTMError) {
        _ = try await lockRequest(.setLock, channel, lockName, "setLock") { $0.ttl = ttl }
    }

    /// Takes a lock; returns its fencing token. With `retry`, waits until the lock is free
    /// (first come, first served) instead of failing with `lockAcquireFailed`.
    @discardableResult
    public func acquireLock(channel: String, lockName: String, retry: Bool = false) async throws(RTMError) -> UInt64 {
        let reply = try await lockRequest(.acquireLock, channel, lockName, "acquireLock", wait: retry) { $0.retry = retry ? true : nil }
        let token = reply.fencingToken ?? 0
        let core = self.core
        await onLoopVoid { core.heldLocks[channel, default: [:]][lockName] = token }
        return token
    }

    /// Gives a held lock back.
    public func releaseLock(channel: String, lockName: String) async throws(RTMError) {
        let core = self.core
        await onLoopVoid { core.heldLocks[channel]?[lockName] = nil }
        _ = try await lockRequest(.releaseLock, channel, lockName, "releaseLock") { _ in }
    }

    /// Takes a lock away from its holder `owner`.
    public func revokeLock(channel: String, lockName: String, owner: String) async throws(RTMError) {
        _ = try await lockRequest(.revokeLock, channel, lockName, "revokeLock") { $0.userId = owner }
    }

    /// Deletes a lock.
    public func removeLock(channel: String, lockName: String) async throws(RTMError) {
        _ = try await lockRequest(.removeLock, channel, lockName, "removeLock") { _ in }
    }

    /// The locks of a channel, with holders and fencing tokens.
    public func getLocks(channel: String) async throws(RTMError) -> [LockDetail] {
        try check(channel: channel, operation: "getLocks")
        let core = self.core
        let future = core.loop.flatSubmit { core.request(Frame(type: .getLocks, channel: channel), operation: "getLocks") }
        return try await Self.wait(future, operation: "getLocks").locks ?? []
    }

    private func lockRequest(_ type: FrameType, _ channel: String, _ lockName: String, _ operation: String, wait: Bool = false,
                             _ body: (inout Frame) -> Void) async throws(RTMError) -> Frame {
        try check(channel: channel, operation: operation)
        if let problem = Limits().nameProblem(lockName, kind: "lock name") {
            throw RTMError(.lockInvalidName, operation: operation, problem)
        }
        var frame = Frame(type: type, channel: channel)
        frame.lockName = lockName
        body(&frame)
        let request = frame
        let core = self.core
        let future = core.loop.flatSubmit {
            core.request(request, operation: operation, timeout: wait ? .infinity : nil)
        }
        return try await Self.wait(future, operation: operation)
    }
}
