import NIOCore

/// The channel pipeline's resend memory (SPEC M-3): each publisher's recent client message ids
/// with the number each got, so that a resend is answered with its first number instead of
/// being published twice, on a single node and across the nodes of a cluster alike (every node
/// remembers the ids of the log it applies, in the log's order: every node decides alike).
/// A sub-value of `HubState`: changed only through its own functions.
struct PublishResendMemory {
    /// A client message id with its number, at `offset` in a run.
    struct NumberedID {
        let offset: Int
        let id: UInt64
        let seq: UInt64
    }

    /// Each publisher's remembered ids → their first number.
    private(set) var ids: [UserKey: RecentIDs<UInt64>] = [:]
    /// When the memories of publishers without a session go.
    private(set) var retention = ResendMemoryRetention()
    /// How many ids are kept per publisher.
    let capacity: Int
    /// How long a publisher's ids outlive its last session (`publishResendWindow`).
    let windowMillis: Int64

    init(capacity: Int, windowMillis: Int64) {
        self.capacity = capacity
        self.windowMillis = windowMillis
    }

    /// The numbers these messages of `publisher` already got (resends), nil for new ones; nil
    /// altogether when none is known (the usual case: nothing is allocated).
    mutating func knownNumbers(of messages: [Hub.Outgoing], publisher: UserKey) -> [UInt64?]? {
        guard var memory = ids.removeValue(forKey: publisher) else { return nil }
        defer { ids[publisher] = memory }   // taken out and put back: no copy of the table
        guard let first = messages.firstIndex(where: { $0.msgId.map { memory[$0] != nil } ?? false }) else { return nil }
        return messages.indices.map { index in index < first ? nil : messages[index].msgId.flatMap { memory[$0] } }
    }

    /// Remembers `publisher`'s ids with their numbers (`(id, seq)` in log order), touching its
    /// memory once (and not at all when there is none). Returns how many ids there were, and
    /// the offsets (in `numbered`) of copies stored twice: an id remembered before under another
    /// number (a cluster's resend committed through two nodes).
    mutating func remember<Numbered: Sequence>(_ numbered: Numbered, publisher: UserKey) -> (count: Int, copies: [Int])
        where Numbered.Element == NumberedID {
        var iterator = numbered.makeIterator()
        guard let first = iterator.next() else { return (0, []) }
        var memory = ids.removeValue(forKey: publisher) ?? RecentIDs(capacity: capacity)
        defer { ids[publisher] = memory }
        var copies: [Int] = []
        var count = 0
        var next: NumberedID? = first
        while let item = next {
            let (offset, id, seq) = (item.offset, item.id, item.seq)
            count += 1
            next = iterator.next()
            if let first = memory[id] {
                if first != seq { copies.append(offset) }
            } else {
                memory.remember(id, seq)
            }
        }
        return (count, copies)
    }

    /// Whether `publisher`'s memory is waiting for its window to end.
    func isRetiring(_ publisher: UserKey) -> Bool { retention.isPending(publisher) }

    /// `publisher` has no session on any node since `nowMillis`: its ids go `windowMillis` later
    /// (a resend from its next session, or through another node, is recognised until then).
    mutating func publisherLeft(_ publisher: UserKey, nowMillis: Int64) {
        guard ids[publisher] != nil else { return }
        retention.sessionsEnded(publisher, nowMillis: nowMillis, windowMillis: windowMillis)
    }

    /// The publishers whose window ended by `nowMillis` (the caller forgets those without a
    /// session again: `forget`).
    mutating func due(nowMillis: Int64) -> [UserKey] { retention.due(nowMillis: nowMillis) }

    /// Forgets `publisher`'s ids.
    mutating func forget(_ publisher: UserKey) { ids[publisher] = nil }
}
