import Logging
import NIOCore
import RTMProtocol

/// What may run while the hub's state lock is still held: only a non-blocking hop to event
/// loops whose order must be the transaction's (a channel's messages in sequence order, whoever
/// published them, and a gap notice among them: `Hub.modify(inOrder:)`). Everything else is a
/// `HubAction` and runs after the lock is released.
enum LockedHubAction: Sendable {
    /// An encoded run of channel messages to the loops with subscribers of `channel`.
    case fanOut(ByteBuffer, messages: Int, channel: ChannelKey, loops: UInt64)
    /// A frame to a channel's subscribers, ordered with its messages (a gap notice).
    case broadcast(HubState.Broadcast)
}

/// One effect of a `HubState` event. Events return them in order; `Hub.run` performs them
/// after releasing the state lock (writes are hops to event loops, store calls go to their own
/// queues, timers come back as events).
enum HubAction: Sendable {
    /// A frame to a channel's subscribers (presence, lock and storage events, gaps).
    case broadcast(HubState.Broadcast)
    /// A frame to one connection.
    case send(Frame, to: ConnectionRef)
    /// The session ended while connected: `kicked` with `code` and `reason` (another client
    /// logged in as the same user, C-6; an administrator), then close 1000.
    case kick(ConnectionRef, user: UserKey, code: LinkStateChangeReason, reason: String)
    /// The session moved to another connection, or ended elsewhere: close 1000, quietly.
    case closeReplaced(ConnectionRef, reason: String)
    /// The user's MESSAGE session is over: its STREAM connections close (K-3, K-4).
    case closeStreams(UserKey, reason: String)
    /// Hand `timer` back as an event at `deadline`, on event loop `loop`.
    case schedule(HubTimer, at: NIODeadline, loop: Int = 0)
    /// A login whose reply waited for the cluster may be answered now.
    case answerLogin(EventLoopPromise<Void>)
    /// Cluster events were queued (`ClusterReplica.outbox`): the node's log (`NodeLink`) takes them.
    case wakeCluster
    /// Webhook events were queued (`WebhookOutbox`): the dispatcher takes them.
    case wakeWebhooks
    /// A lock owner's change goes to the lock store (§2.12).
    case lockOwner(UserKey, LockOwnerChange)
    /// History older than this (ms since the Unix epoch) is forgotten.
    case trimHistory(olderThanMillis: Int64)
    /// Release the due locks and try the waits again (§2.12).
    case sweepLocks
    /// A call invitation changed (or is forgotten): the invitation store is told (§1.8).
    case storeInvitation(InvitationTable.Change)
    /// An invitation request is answered (§1.8).
    case answerInvitation(EventLoopPromise<InvitationReply>, InvitationReply)
    /// Cluster mode: the backplane is asked to deliver these channels to this node
    /// (`ChannelBackplane.follow`); a failure comes back as `HubState.followFailed`.
    case follow([BackplaneFollow])
    /// Cluster mode: the backplane stops delivering these channels to this node.
    case unfollow([BackplaneFollow])
    /// Requests that waited for their channels to be followed go on (`true`: followed).
    case answerFollow([EventLoopPromise<Bool>], Bool)
    /// A line for the server's log.
    case log(Logger.Level, Logger.Message, Logger.Metadata)

    /// What the lock store is told of a lock owner.
    enum LockOwnerChange {
        /// Its connection was lost: its locks are due `ttl` from now, its waits end.
        case lost(ConnectionRef)
        /// It logged in or resumed here.
        case online
        /// Its session ended for good (a logout, an administrator): its locks are released,
        /// the waits of the connection that served it (nil: none, it was in its grace window) end.
        case loggedOut(ConnectionRef?)
    }
}
