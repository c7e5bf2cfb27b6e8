import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// A cluster's `StreamClusterLink`: how stream channels reach the backplane. Each member's topic
/// messages go through its own `TopicOutbox` queue (`BackplaneTopicPath`), and each channel's
/// membership changes (`StreamClusterEvent`) through the channel's, one commit in flight per
/// queue, so they are stored (and applied on every node) in the order they were queued.
final class BackplaneStreamLink: StreamClusterLink, Sendable {
    let backplane: any ChannelBackplane
    /// This server run (`Hub.epoch`), carried by every membership event.
    let instance: String
    let status: ClusterStatus
    let outbox: TopicOutbox

    init(backplane: any ChannelBackplane, instance: String, status: ClusterStatus, outbox: TopicOutbox = TopicOutbox()) {
        self.backplane = backplane
        self.instance = instance
        self.status = status
        self.outbox = outbox
    }

    /// Queues `publish` behind `membership`'s earlier ones; `done` runs (on any thread) once it
    /// is committed, or failed (nothing stored), or refused at once (the database is known to
    /// be down, or too many of the member's wait).
    func send(_ publish: BackplanePublish, for membership: StreamMembership,
              done: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }) {
        guard status.admitsCommit() else { return done(.failure(DatabaseLinkDown())) }
        switch outbox.add(TopicOutbox.Item(publish: publish, done: done), for: membership) {
        case .queued:
            break
        case .full:
            done(.failure(TopicOutboxFull(capacity: outbox.capacity)))
        case .startDrain:
            Task { await drain(membership) }
        }
    }

    /// Announces a membership change in `channel` to the other nodes. A channel's changes wait
    /// in one queue (in the order they happened); when the database is down they are lost and
    /// the `sync` sent when it is back repairs the other nodes' view.
    func announce(_ event: StreamClusterEvent, channel: ChannelKey,
                  done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        announced.withLockedValue { _ = $0.insert(channel) }
        send(Self.publish(event, appId: channel.appId, logChannel: Hub.streamLogChannel(channel.name), publisher: event.user ?? ""),
             for: StreamMembership(channel: channel, userId: ""), done: done)
    }

    /// The channels this node announced members in (each gets a `sync` when the database link
    /// comes back, so that the other nodes learn what they missed, leaves included).
    private let announced = NIOLockedValueBox<Set<ChannelKey>>([])

    func announcedChannels() -> Set<ChannelKey> {
        announced.withLockedValue { $0 }
    }

    func forget(_ channel: ChannelKey) {
        announced.withLockedValue { _ = $0.remove(channel) }
    }

    /// Tells the other nodes this run started: members of this node's earlier run are gone.
    func announceStart() {
        let event = StreamClusterEvent(op: .start, instance: instance)
        send(Self.publish(event, appId: "", logChannel: Hub.topicLogPrefix, publisher: ""),
             for: StreamMembership(channel: ChannelKey(appId: "", name: ""), userId: ""))
    }

    private static func publish(_ event: StreamClusterEvent, appId: String, logChannel: String, publisher: String) -> BackplanePublish {
        var payload = ByteBuffer()
        payload.writeBytes((try? JSONEncoder().encode(event)) ?? Data())
        return BackplanePublish(appId: appId, channel: logChannel, publisher: publisher, msgId: nil, customType: nil, isText: true,
                                payload: payload, millis: Hub.wallMillis)
    }

    /// Waits (up to `limit`) until every queued message was committed or failed: a server that
    /// shuts down lets its members' last changes reach the other nodes first, but never waits
    /// for a database that does not answer.
    func settle(within limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while !outbox.isIdle, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Commits `membership`'s waiting messages, one transaction at a time, until none wait.
    private func drain(_ membership: StreamMembership) async {
        while let items = outbox.take(for: membership) {
            let started = NIODeadline.now()
            do {
                _ = try await backplane.publish(items.map(\.publish))
                status.committed(nanoseconds: (NIODeadline.now() - started).nanoseconds)
                status.setDatabase(up: true, reason: "a stream channel message was committed", from: .commit)
                for item in items { item.done(.success(())) }
            } catch {
                status.setDatabase(up: false, reason: "a stream channel message could not be committed: \(ClusterCommitFailure.logDescription(error))", from: .commit)
                for item in items { item.done(.failure(error)) }
            }
        }
    }
}

/// A member has `capacity` topic messages waiting for the cluster's database already.
struct TopicOutboxFull: Error, CustomStringConvertible {
    let capacity: Int
    var description: String { "\(capacity) messages of this stream channel member are waiting for the cluster's database already" }
}
