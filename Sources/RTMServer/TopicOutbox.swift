import NIOConcurrencyHelpers

/// Cluster mode (issue 13): each publisher's topic messages waiting for the backplane. One
/// commit per publisher (stream membership) is in flight at a time and the messages that
/// arrive meanwhile go into the next one together, so a publisher's messages are stored, and
/// delivered on every node, in the order it published them (AGORA_REFERENCE §2.9), while a
/// busy publisher still costs one transaction per round trip, not one per message.
///
/// The queue of a publisher is bounded (`capacity`): beyond it a publish is refused at once
/// rather than held in memory while the database is slow.
final class TopicOutbox: Sendable {
    /// A topic message and what to do once it is committed (or failed).
    struct Item: Sendable {
        let publish: BackplanePublish
        let done: @Sendable (Result<Void, any Error>) -> Void
    }

    /// What `add` decided.
    enum Admission: Equatable {
        /// Queued behind a commit in flight: the drain that runs will take it.
        case queued
        /// Nothing was in flight: the caller starts the drain (`Hub.drainTopics`).
        case startDrain
        /// The publisher has `capacity` messages waiting already.
        case full
    }

    /// The most messages one publisher may have waiting.
    let capacity: Int
    private struct State {
        /// Present while a drain runs for the publisher (empty: the drain's commit is in flight).
        var queues: [StreamMembership: [Item]] = [:]
        /// `idle()` callers, resumed when no drain runs.
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = NIOLockedValueBox(State())

    init(capacity: Int = 1_000) {
        self.capacity = capacity
    }

    /// Queues `item` for `publisher`.
    func add(_ item: Item, for publisher: StreamMembership) -> Admission {
        state.withLockedValue { state in
            guard var waiting = state.queues.removeValue(forKey: publisher) else {
                state.queues[publisher] = [item]
                return .startDrain
            }
            defer { state.queues[publisher] = waiting }
            guard waiting.count < capacity else { return .full }
            waiting.append(item)
            return .queued
        }
    }

    /// The drain takes everything waiting for `publisher`; nil (and the drain ends) when
    /// nothing is.
    func take(for publisher: StreamMembership) -> [Item]? {
        let (items, idle) = state.withLockedValue { state -> ([Item]?, [CheckedContinuation<Void, Never>]) in
            guard let waiting = state.queues[publisher], !waiting.isEmpty else {
                state.queues[publisher] = nil
                guard state.queues.isEmpty else { return (nil, []) }
                defer { state.idleWaiters = [] }
                return (nil, state.idleWaiters)
            }
            state.queues[publisher] = []
            return (waiting, [])
        }
        for waiter in idle { waiter.resume() }
        return items
    }

    /// How many `idle()` callers wait.
    var idleWaiterCount: Int { state.withLockedValue { $0.idleWaiters.count } }

    /// Returns once no drain runs (everything queued so far was committed or failed): a server
    /// that shuts down lets its members' last changes reach the other nodes first.
    func idle() async {
        await withCheckedContinuation { continuation in
            let now = state.withLockedValue { state in
                guard !state.queues.isEmpty else { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
