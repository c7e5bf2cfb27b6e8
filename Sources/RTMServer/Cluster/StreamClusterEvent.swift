/// Cluster mode: a change of a stream channel's membership on one node, written to
/// the backplane's log (log channel `/stream/<channel>`, JSON) so that every other node keeps
/// a mirror of the channel's remote members: their presence, their topics and metas
/// (`StreamState+Remote`). Quiet members (`beQuiet`) are never announced: nobody sees them.
struct StreamClusterEvent: Codable, Sendable, Equatable {
    enum Op: String, Codable, Sendable {
        /// A member joined (visible).
        case join
        /// All of a node's visible members of the channel, with their topics (an answer to a
        /// node new to the channel, and after the database link came back): the others
        /// reconcile their mirror of that node's members with it.
        case sync
        /// A member left (or its connection was lost).
        case leave
        /// A member joined a topic as publisher, or changed its meta.
        case joinTopic
        /// A member left a topic.
        case leaveTopic
        /// A node (re)started: members of its earlier run are gone (log channel `/stream/`).
        case start
    }

    var op: Op
    /// The server run that sent it (`Hub.epoch`): a node ignores its own, and a member's
    /// entry belongs to the run that announced it.
    var instance: String
    var user: String?
    /// `sync`: the node's visible members → their topics → meta.
    var members: [String: [String: String]]?
    var topic: String?
    var meta: String?
    /// `leave`: the presence event kind others are told (`remoteLeave`).
    var reason: String?
}
