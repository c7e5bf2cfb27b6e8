import NIOCore

/// The mailbox's calls on a store: each runs on the store's own thread (`thread`, in the order
/// asked) and reports its end through a callback, on that thread; the caller never blocks.
extension UserMessageStore {
    /// Commits `request` unless `begins()`, asked on the store's thread just before, says no
    /// (its deadline came first: it never begins; `ended` gets nil). Resends are recognised
    /// back to `resendsSince` (ms, SPEC M-3).
    func commit(_ request: UserMailboxState.CommitRequest, cap: Int, resendsSince: Int64, metrics: ServerMetrics?,
                begins: @escaping @Sendable () -> Bool,
                ended: @escaping @Sendable (Result<[CommittedUserMessage], any Error>?) -> Void) {
        thread.run { [self] in
            guard begins() else { return ended(nil) }
            let started = NIODeadline.now()
            let result = Result {
                try commit(request.messages, acknowledgements: request.acknowledgements, cap: cap, resendsSince: resendsSince,
                           before: request.due)
            }
            metrics?.storeCommitted(nanoseconds: (NIODeadline.now() - started).nanoseconds)
            ended(result)
        }
    }

    /// Reads the messages waiting for `read.key` (older than `notBefore`, ms: dropped); a
    /// login's read also takes the count of those dropped since the last one (before and after
    /// the read: the read itself drops the old ones).
    func read(_ read: UserMailboxState.Read, notBefore: Int64,
              then: @escaping @Sendable (Result<UserMailboxState.WaitingRead, any Error>) -> Void) {
        thread.run { [self] in
            then(Result {
                let key = read.key
                guard read.login else {
                    return UserMailboxState.WaitingRead(dropped: 0, messages: try pending(appId: key.appId, receiver: key.userId, notBefore: notBefore))
                }
                let dropped = try takeDropped(appId: key.appId, receiver: key.userId)
                let waiting = try pending(appId: key.appId, receiver: key.userId, notBefore: notBefore)
                return UserMailboxState.WaitingRead(dropped: dropped + (try takeDropped(appId: key.appId, receiver: key.userId)), messages: waiting)
            })
        }
    }

    /// Looks up the newest ids of `keys` (`newest`).
    func newest(_ keys: [UserKey], then: @escaping @Sendable (Result<[UserKey: Int64], any Error>) -> Void) {
        thread.run { [self] in
            then(Result {
                let found = try newest(keys.map { UserMessageReceiver(appId: $0.appId, userId: $0.userId) })
                return Dictionary(found.map { (UserKey(appId: $0.key.appId, userId: $0.key.userId), $0.value) }) { max($0, $1) }
            })
        }
    }

    /// Resets the count of messages dropped for `key` (reported already).
    func forgetDropped(_ key: UserKey) {
        thread.run { [self] in _ = try? takeDropped(appId: key.appId, receiver: key.userId) }
    }
}
