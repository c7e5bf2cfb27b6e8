/// Whether this node is cut off from the database while the others reach it, as a value
/// (cluster: a network partition between one node and PostgreSQL).
///
/// A node whose lease ran out unrenewed cannot tell, from the database, being cut off from an
/// outage of the database itself. The others can: it asks them (`/health`, "database: up").
/// Cut off (one says up, and this node still cannot reach the database when it tries once more),
/// it sends its clients away, once, to reconnect to a node that reaches the database, and
/// `/ready` says 503; in an outage for everyone (nobody says up) its clients stay and local
/// traffic goes on. It asks again at every failed round until its lease is renewed.
///
/// **Cut off, or declared dead** (fencing). A node paused past its lease (SIGSTOP, a stalled
/// VM) wakes with its lease lapsed by its own clock and the round that spanned the pause failed
/// (its deadline passed during the pause), while the others, who reach the database, have
/// declared it dead. It does reach the database, and its next renewal finds the fence
/// (`BackplaneEvent.fenced`): its clients must be told that it was declared dead, never that it
/// cannot reach the database. So the others' "up" alone does not cut the node off: the node
/// first tries the database itself (a renewal, after their answer), and only a failed try cuts
/// it off; a try that got an answer (renewed, or found the fence) leaves the telling to the
/// fence. Which of the two reasons its clients get depends on whether it reaches the database,
/// not on which of its timers fired first.
struct PartitionWatch: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        /// The lease runs (or ran out and was renewed, or the node learned of its fence).
        case joined
        /// Asking the others.
        case probing
        /// Another node reaches the database: this node tries it once more.
        case confirming
        /// Nobody said the database is up: an outage for everyone (or nobody to ask).
        case alone
        /// Another node reaches the database and this one did not, after their answer: it is cut
        /// off; its clients were sent away.
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
        case .probing, .confirming, .cutOff:
            return false
        }
    }

    /// What the others' answer means.
    enum Finding: Sendable, Equatable {
        /// Another node reaches the database: this node tries it once more (`confirmed`).
        case othersReach
        /// Nobody reaches the database; `first`: the first such answer of this lapse (to log).
        case alone(first: Bool)
        /// Came after the lease was renewed: nothing.
        case late
    }

    /// The others answered whether one of them reaches the database.
    mutating func probed(othersReachDatabase: Bool) -> Finding {
        guard phase == .probing else { return .late }
        if othersReachDatabase {
            phase = .confirming
            return .othersReach
        }
        let first = !wasAlone
        phase = .alone
        wasAlone = true
        return .alone(first: first)
    }

    /// This node tried the database after the others said they reach it: true when it is cut
    /// off now (it did not reach it; its clients are to be sent away, once per lapse). One that
    /// reached it (renewed, or learned of its fence) is not cut off: the lapse ends with its
    /// renewal or its fence; were its lease still lapsed at the next failed round, it asks again.
    mutating func confirmed(reachesDatabase: Bool) -> Bool {
        guard phase == .confirming else { return false }   // renewed or fenced meanwhile
        if reachesDatabase {
            phase = .joined
            return false
        }
        phase = .cutOff
        return true
    }

    /// The lease was renewed, or the node learned that the others declared it dead (it reached
    /// the database either way).
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
        case .probing, .confirming: "lease: lapsed\n"
        case .alone: "lease: lapsed (no other node reaches the database)\n"
        case .cutOff: "lease: lapsed (other nodes reach the database: this node is cut off)\n"
        }
    }
}
