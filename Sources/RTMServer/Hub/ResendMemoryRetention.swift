import DequeModule

/// How long a publisher's remembered client message ids outlive its last session (SPEC M-3):
/// a resend from a new session (the app logged in again after an error whose outcome was
/// unknown, or its client moved to another node of a cluster) is still recognised within the
/// window. Ids are kept while the user has a session here or on another node; from the end of
/// the last one, for `publishResendWindow`. A plain value: the hub tells it when sessions end
/// and asks which memories are due, with the time passed in. Amortised O(1): the deadlines come
/// in time order, so the due ones are at the front.
struct ResendMemoryRetention {
    private var due: Deque<(key: UserKey, atMillis: Int64)> = []
    /// The latest deadline of each user with one pending (a deadline superseded by a later one
    /// is skipped when it comes due).
    private var latest: [UserKey: Int64] = [:]

    /// The user's last session ended at `nowMillis`: its ids go at `nowMillis + windowMillis`.
    mutating func sessionsEnded(_ key: UserKey, nowMillis: Int64, windowMillis: Int64) {
        let deadline = nowMillis + windowMillis
        latest[key] = deadline
        due.append((key, deadline))
    }

    /// The users whose window ended by `nowMillis` (the caller forgets their ids unless they
    /// have a session again).
    mutating func due(nowMillis: Int64) -> [UserKey] {
        var keys: [UserKey] = []
        while let first = due.first, first.atMillis <= nowMillis {
            due.removeFirst()
            if latest[first.key] == first.atMillis {
                latest[first.key] = nil
                keys.append(first.key)
            }
        }
        return keys
    }

    /// Whether `key`'s window is running.
    func isPending(_ key: UserKey) -> Bool { latest[key] != nil }

    /// Users waiting for their window to end (tests, memory checks).
    var pending: Int { latest.count }
}
