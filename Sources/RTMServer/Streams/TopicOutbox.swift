import NIOConcurrencyHelpers

/// Cluster mode: each publisher's topic messages waiting for the backplane. One
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
    /// Present while a drain runs for the publisher (empty: the drain's commit is in flight).
    private let queues = NIOLockedValueBox<[StreamMembership: [Item]]>([:])

    init(capacity: Int = 1_000) {
        self.capacity = capacity
    }

    /// Queues `item` for `publisher`.
    func add(_ item: Item, for publisher: StreamMembership) -> Admission {
        queues.withLockedValue { queues in
            guard var waiting = queues.removeValue(forKey: publisher) else {
                queues[publisher] = [item]
                return .startDrain
            }
            defer { queues[publisher] = waiting }
            guard waiting.count < capacity else { return .full }
            waiting.append(item)
            return .queued
        }
    }

    /// The drain takes everything waiting for `publisher`; nil (and the drain ends) when
    /// nothing is.
    func take(for publisher: StreamMembership) -> [Item]? {
        queues.withLockedValue { queues in
            guard let waiting = queues[publisher], !waiting.isEmpty else {
                queues[publisher] = nil
                return nil
            }
            queues[publisher] = []
            return waiting
        }
    }

    /// No drain runs: everything queued so far was committed or failed.
    var isIdle: Bool { queues.withLockedValue { $0.isEmpty } }
}
