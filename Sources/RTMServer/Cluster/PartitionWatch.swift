/// Whether this node is cut off from the database while the others reach it, as a value
/// (cluster: a network partition between one node and PostgreSQL).
///
/// A node whose lease ran out unrenewed cannot tell, from the database, being cut off from an
/// outage of the database itself. The others can: it asks them (`/health`, "database: up").
/// Cut off (one says up), it sends its clients away, once, to reconnect to a node that reaches
/// the database, and `/ready` says 503; in an outage for everyone (nobody says up) its clients
/// stay and local traffic goes on. It asks again at every failed round until its lease is
/// renewed.
struct PartitionWatch: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        /// The lease runs (or ran out and was renewed).
        case joined
        /// Asking the others.
        case probing
        /// Nobody said the database is up: an outage for everyone (or nobody to ask).
        case alone
        /// Another node reaches the database: this one is cut off; its clients were sent away.
        case cutOff
    }

    private(set) var phase = Phase.joined
    /// Found alone (an outage for everyone) since the lease ran out.
    private var wasAlone = false

    /// The lease ran out unrenewed (reported at every failed round): true when the others
    /// should be asked now (`peers` not empty, no question in flight, not known cut off).
    mutating func lapsed(peers: [String]) -> Bool {
        switch phase {
        case .joined, .alone:
            guard !peers.isEmpty else {
                phase = .alone
                wasAlone = true
                return false
            }
            phase = .probing
            return true
        case .probing, .cutOff:
            return false
        }
    }

    /// What the others' answer means.
    enum Finding: Sendable, Equatable {
        /// Cut off now: its clients are to be sent away (once per lapse).
        case cutOff
        /// Nobody reaches the database; `first`: the first such answer of this lapse (to log).
        case alone(first: Bool)
        /// Came after the lease was renewed: nothing.
        case late
    }

    /// The others answered whether one of them reaches the database.
    mutating func probed(othersReachDatabase: Bool) -> Finding {
        guard phase == .probing else { return .late }
        if othersReachDatabase {
            phase = .cutOff
            return .cutOff
        }
        let first = !wasAlone
        phase = .alone
        wasAlone = true
        return .alone(first: first)
    }

    /// The lease was renewed.
    mutating func renewed() {
        phase = .joined
        wasAlone = false
    }

    /// Cut off while the others reach the database (`/ready` answers 503).
    var isCutOff: Bool { phase == .cutOff }

    /// The line `/health` and `/ready` add (empty while the lease runs).
    var healthDetail: String {
        switch phase {
        case .joined: ""
        case .probing: "lease: lapsed\n"
        case .alone: "lease: lapsed (no other node reaches the database)\n"
        case .cutOff: "lease: lapsed (other nodes reach the database: this node is cut off)\n"
        }
    }
}
