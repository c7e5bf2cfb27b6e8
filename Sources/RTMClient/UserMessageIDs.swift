/// Which user messages the application has had (SPEC M-1, M-3), as a value: the last id emitted
/// per mailbox epoch. Ids are only comparable within an epoch; a cluster's store can deliver
/// messages of an earlier epoch after those of a new one (messages stored before a database
/// failover, sent again at the next login because their acknowledgement was lost), so each
/// epoch keeps its own last id. The most recent `capacity` epochs are remembered.
struct UserMessageIDs: Sendable {
    /// What a received id is.
    enum Verdict: Equatable {
        /// Seen already under its epoch: drop it (acknowledge it anyway).
        case duplicate
        /// New, in an epoch seen before (or the first epoch ever seen).
        case new
        /// New, and the first of an epoch not seen before while another one was: messages may
        /// have been lost in between.
        case newEpoch(String)
    }

    private var last: [String: UInt64] = [:]
    /// Epochs, oldest first.
    private var order: [String] = []
    private let capacity: Int

    init(capacity: Int = 8) {
        self.capacity = capacity
    }

    /// Records `id` under `epoch` (nil: a server that names none) and says what it is.
    mutating func receive(_ id: UInt64, epoch: String?) -> Verdict {
        let epoch = epoch ?? ""
        if let seen = last[epoch] {
            guard id > seen else { return .duplicate }
            last[epoch] = id
            return .new
        }
        let first = order.isEmpty
        last[epoch] = id
        order.append(epoch)
        if order.count > capacity { last[order.removeFirst()] = nil }
        return first ? .new : .newEpoch(epoch)
    }
}
