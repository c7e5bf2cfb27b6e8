import Foundation

/// What one node tells the others about its sessions and channel members,
/// through the backplane's control channel (`ClusterEvent.channel`): one log, one order for
/// every node, so every node applies the same changes in the same order to its copy of the
/// other nodes' sessions (`ClusterReplica`) and tells its own subscribers.
///
/// Each node is the only writer of its own sessions (`started`, `moved`, `ended`, `member`);
/// the exceptions are the survivors of a dead node, which end its sessions after their grace
/// window (`ended` from any survivor: the first one in the log wins, the others find nothing).
struct ClusterEvent: Codable, Sendable {
    /// The control channel's name in the backplane's log. User channel names cannot contain '/'
    /// (`Limits.allowedPunctuation`), so it never meets a user channel; its app id is "".
    static let channel = "/cluster"

    /// The writer: a node instance (`node id#run`), new at every start of a node.
    var from: String
    var kind: Kind

    enum Kind: Codable, Sendable {
        /// A node instance started: the others send it their sessions (`sync`). A new instance
        /// of a known node id also means the earlier one is gone (a restart).
        case hello
        /// Part of a node's sessions (up to 500 per event), for the instance `to` that said hello.
        case sync(to: String, sessions: [ClusterSession])
        /// A new session (a login that did not resume, SPEC C-6): every other session of the
        /// user that came earlier in the log ends (its client is kicked), whichever node has it.
        case started(ClusterSession)
        /// A session resumed on the writer (SPEC P-1): it moves there with its channels and
        /// states, and nobody sees a leave or join.
        case moved(ClusterSession)
        /// A session ended: logout (`leave`) or its grace window ran out (`timeout`).
        case ended(appId: String, userId: String, session: UInt64, timedOut: Bool)
        /// A member of a session joined, left or changed its state in a channel.
        case member(appId: String, userId: String, session: UInt64, channel: String, change: MemberChange)
        /// A call invitation event (§1.8), written to the invitation channel
        /// (`InvitationEvent.channel`, HubState+InvitationLog), not the control channel.
        case invitation(InvitationEvent)
    }

    /// The log channel the event is written to.
    var logChannel: String {
        if case .invitation = kind { InvitationEvent.channel } else { Self.channel }
    }

    enum MemberChange: Codable, Sendable, Equatable {
        case join(ClusterMember)
        case leave
        case state([String: String])
    }

    /// The node id part of an instance name.
    static func node(of instance: String) -> Substring {
        instance.split(separator: "#", maxSplits: 1).first ?? Substring(instance)
    }

    func encoded() -> Data {
        // Only plain strings, numbers, bools and arrays/dictionaries of them: cannot fail.
        (try? JSONEncoder().encode(self)) ?? Data()
    }
}

/// A session as the cluster knows it.
struct ClusterSession: Codable, Sendable, Equatable {
    var appId: String
    var userId: String
    var id: UInt64
    var resumeToken: String
    var heartbeatMillis: Int64
    var presenceTimeoutMillis: Int64
    /// Its channels and how it is a member of each.
    var members: [String: ClusterMember]

    var key: UserKey { UserKey(appId: appId, userId: userId) }
}

/// How a session is a member of one channel.
struct ClusterMember: Codable, Sendable, Equatable {
    var quiet: Bool
    var features: UInt8
    var state: [String: String]
}
