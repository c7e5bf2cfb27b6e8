import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// The stream channels as a value (AGORA_REFERENCE §2.9), time passed in, no socket: joins,
/// leaves and rejoins (SPEC K-3: one STREAM connection per member), topics and topic
/// subscriptions, the webhook outbox, and the mirror of other nodes' members. One event, the
/// actions it returns.
struct StreamStateTests {
    private static let game = ChannelKey(appId: "app", name: "game")
    private static let wall: Int64 = 1_800_000_000_000

    private static func connection(_ id: UInt64) -> ConnectionRef { ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: 0) }

    private static func member(_ user: String) -> StreamMembership { StreamMembership(channel: game, userId: user) }

    private static func state(webhooks: Bool = true) -> StreamState {
        StreamState(limits: Limits(), instance: "a#1", webhooks: webhooks)
    }

    /// Joins `user` on `connection`; returns the join's actions.
    @discardableResult
    private static func join(_ state: inout StreamState, _ user: String, _ connection: ConnectionRef, quiet: Bool = false,
                             withPresence: Bool = true) -> [StreamAction] {
        state.join(member(user), connection: connection, quiet: quiet, withPresence: withPresence, services: [], wallMillis: wall).actions
    }

    /// A channel where `members` joined (in order; those in `withoutPresence` without presence) and alice
    /// publishes topic "moves" (meta "m"); the webhook outbox taken.
    private static func channel(_ members: [(String, ConnectionRef)], withoutPresence: Set<String> = []) throws -> StreamState {
        var state = Self.state()
        for (user, connection) in members { join(&state, user, connection, withPresence: !withoutPresence.contains(user)) }
        _ = try state.joinTopic(member("alice"), topic: "moves", meta: "m", wallMillis: wall)
        _ = webhookKinds(&state)
        return state
    }

    /// The frames sent, as "event user → connection ids".
    private static func sends(_ actions: [StreamAction]) -> [String] {
        actions.compactMap {
            guard case .send(let frame, let to) = $0 else { return nil }
            return "\(frame.event ?? "") \(frame.userId ?? "") → \(to.map(\.id).sorted())"
        }
    }

    private static func announced(_ actions: [StreamAction]) -> [StreamClusterEvent.Op] {
        actions.compactMap { if case .announce(let event, _) = $0 { event.op } else { nil } }
    }

    private static func webhookKinds(_ state: inout StreamState) -> [String] {
        state.webhooks.take().map { "\($0.eventType.rawValue) \($0.userId)" }
    }

    @Test("K-3: a join tells the members that want presence, is announced to the other nodes and queues a joinChannel webhook; the snapshot lists the visible members and publishers")
    func joinTellsOthers() throws {
        var state = Self.state()
        let alice = Self.connection(1), bob = Self.connection(2), carol = Self.connection(3)
        Self.join(&state, "alice", alice)
        Self.join(&state, "carol", carol, withPresence: false)
        _ = try state.joinTopic(Self.member("alice"), topic: "moves", meta: "m", wallMillis: Self.wall)
        let (snapshot, actions) = state.join(Self.member("bob"), connection: bob, quiet: false, withPresence: true, services: [], wallMillis: Self.wall)
        #expect(snapshot.users == ["alice", "bob", "carol"])
        #expect(snapshot.topics == [TopicInfo(topic: "moves", publishers: [TopicPublisher(userId: "alice", meta: "m")])])
        #expect(actions.first == .wakeWebhooks)
        #expect(Self.sends(actions) == ["remoteJoin bob → [1]"])   // carol joined without presence
        #expect(Self.announced(actions) == [.join])
        #expect(Self.webhookKinds(&state) == ["joinChannel alice", "joinChannel carol", "joinChannel bob"])
    }

    @Test("K-3: a rejoin of the same user replaces its connection (closed), keeps its topics, and tells nobody; the old connection's leave is then nothing")
    func rejoinReplaces() throws {
        let old = Self.connection(1), new = Self.connection(2)
        var state = try Self.channel([("alice", old), ("bob", Self.connection(3))])
        let actions = Self.join(&state, "alice", new)
        #expect(actions == [.closeReplaced(old, reason: "replaced by a new join of the same user")])
        #expect(state.connections(of: UserKey(appId: "app", userId: "alice")) == [new])
        #expect(state.leave(Self.member("alice"), connection: old, reason: .remoteLeave, wallMillis: Self.wall).isEmpty)
        #expect(try state.recipients(of: Self.member("alice"), topic: "moves").isEmpty)   // still its publisher
        #expect(Self.webhookKinds(&state).isEmpty)
    }

    @Test("P-4: a leave tells the others its topics first, then its presence; is announced with its reason; queues a leaveChannel webhook")
    func leaveTellsOthers() throws {
        let alice = Self.connection(1)
        var state = try Self.channel([("alice", alice), ("bob", Self.connection(2)), ("carol", Self.connection(3))], withoutPresence: ["carol"])
        let actions = state.leave(Self.member("alice"), connection: alice, reason: .remoteTimeout, wallMillis: Self.wall)
        #expect(Self.sends(actions) == ["remoteLeaveTopic alice → [2, 3]", "remoteTimeout alice → [2]"])
        guard case .announce(let event, _)? = actions.first(where: { if case .announce = $0 { true } else { false } }) else {
            Issue.record("no announce")
            return
        }
        #expect(event.op == .leave && event.reason == "remoteTimeout" && event.instance == "a#1")
        #expect(Self.webhookKinds(&state) == ["leaveChannel alice"])
        #expect(!state.isMember(Self.member("alice")))
        #expect(state.hasMembers(in: Self.game))
    }

    @Test("§2.9: a quiet member (beQuiet) is seen by nobody: no presence, no topic events, nothing announced; its webhooks are queued")
    func quietMember() throws {
        var state = Self.state()
        let alice = Self.connection(1), ghost = Self.connection(2)
        Self.join(&state, "alice", alice)
        let joined = state.join(Self.member("ghost"), connection: ghost, quiet: true, withPresence: true, services: [], wallMillis: Self.wall)
        #expect(joined.actions == [.wakeWebhooks])
        #expect(joined.snapshot.users == ["alice"])
        #expect(try state.joinTopic(Self.member("ghost"), topic: "t", meta: "", wallMillis: Self.wall).isEmpty)
        #expect(state.leave(Self.member("ghost"), connection: ghost, reason: .remoteLeave, wallMillis: Self.wall) == [.wakeWebhooks])
    }

    @Test("§2.9: joinTopic tells the others once per change of meta and is limited; leaveTopic refuses a topic not joined; a non-member is refused")
    func topics() throws {
        var limits = Limits()
        limits.maxJoinedTopics = 1
        var state = StreamState(limits: limits, instance: "a#1", webhooks: false)
        Self.join(&state, "alice", Self.connection(1))
        Self.join(&state, "bob", Self.connection(2))
        let first = try state.joinTopic(Self.member("alice"), topic: "t", meta: "m", wallMillis: Self.wall)
        #expect(Self.sends(first) == ["remoteJoinTopic alice → [2]"] && Self.announced(first) == [.joinTopic])
        #expect(try state.joinTopic(Self.member("alice"), topic: "t", meta: "m", wallMillis: Self.wall).isEmpty)   // no change
        #expect(throws: RequestRefusal(code: .channelExceedTopicLimitation, reason: "already joined 1 topics, the limit")) {
            try state.joinTopic(Self.member("alice"), topic: "u", meta: "", wallMillis: Self.wall)
        }
        let left = try state.leaveTopic(Self.member("alice"), topic: "t", wallMillis: Self.wall)
        #expect(Self.announced(left) == [.leaveTopic] && Self.sends(left) == ["remoteLeaveTopic alice → [2]"])
        #expect(throws: RequestRefusal(code: .channelTopicNotJoined, reason: "topic 't' is not joined")) {
            try state.leaveTopic(Self.member("alice"), topic: "t", wallMillis: Self.wall)
        }
        #expect(throws: RequestRefusal(code: .channelNotJoined, reason: "not joined")) {
            try state.joinTopic(Self.member("nobody"), topic: "t", meta: "", wallMillis: Self.wall)
        }
    }

    @Test("§2.9: a topic message reaches the members subscribed to it and to its publisher, never the publisher; unsubscribing some publishers keeps the rest")
    func subscriptions() throws {
        var state = Self.state(webhooks: false)
        let alice = Self.connection(1), bob = Self.connection(2), carol = Self.connection(3)
        Self.join(&state, "alice", alice)
        Self.join(&state, "bob", bob)
        Self.join(&state, "carol", carol)
        _ = try state.joinTopic(Self.member("alice"), topic: "t", meta: "", wallMillis: Self.wall)
        #expect(throws: RequestRefusal(code: .channelTopicNotJoined, reason: "topic 't' is not joined: joinTopic first")) {
            try state.recipients(of: Self.member("bob"), topic: "t")
        }
        let bobs = try state.subscribeTopic(Self.member("bob"), topic: "t", users: ["alice", "carol", "no/slash"])
        #expect(bobs.succeeded == ["alice", "carol"] && bobs.failed == ["no/slash"])
        _ = try state.subscribeTopic(Self.member("carol"), topic: "t", users: nil)
        _ = try state.subscribeTopic(Self.member("alice"), topic: "t", users: nil)
        #expect(try state.recipients(of: Self.member("alice"), topic: "t").map(\.id).sorted() == [2, 3])
        try state.unsubscribeTopic(Self.member("bob"), topic: "t", users: ["alice"])
        #expect(try state.recipients(of: Self.member("alice"), topic: "t") == [carol])
        #expect(state.subscribers(of: Self.game, topic: "t", publisher: "carol").map(\.id).sorted() == [1, 2])
        try state.unsubscribeTopic(Self.member("bob"), topic: "t", users: nil)
        #expect(throws: RequestRefusal(code: .channelTopicNotSubscribed, reason: "topic 't' is not subscribed")) {
            try state.unsubscribeTopic(Self.member("bob"), topic: "t", users: nil)
        }
    }

    @Test("PROTOCOL §8.1: grants changed: the member keeps only the services still granted and leaves the topics no longer granted, as leaveTopic would")
    func grantsChanged() throws {
        var state = Self.state(webhooks: false)
        Self.join(&state, "bob", Self.connection(2))
        _ = state.join(Self.member("alice"), connection: Self.connection(1), quiet: false, withPresence: true,
                       services: [.metadata, .lock], wallMillis: Self.wall)
        for topic in ["a", "b"] { _ = try state.joinTopic(Self.member("alice"), topic: topic, meta: "", wallMillis: Self.wall) }
        let refused = RequestRefusal(code: .notPermitted, reason: "no")
        let (left, actions) = state.grantsChanged(Self.member("alice"), services: [.lock], refusal: { $0 == "b" ? refused : nil },
                                                  wallMillis: Self.wall)
        #expect(left.map(\.topic) == ["b"] && left.first?.refusal == refused)
        #expect(Self.announced(actions) == [.leaveTopic] && Self.sends(actions) == ["remoteLeaveTopic alice → [2]"])
        #expect(state.services(of: Self.member("alice")) == .lock)
        #expect(state.serviceTargets(of: Self.game, wanting: .metadata).isEmpty)
    }

    @Test("K-3 across nodes: the mirror of remote members: a remote join is told to local members and answered with a sync; own events are skipped; the snapshot includes remote members")
    func remoteJoin() {
        var state = Self.state(webhooks: false)
        Self.join(&state, "alice", Self.connection(1))
        Self.join(&state, "bob", Self.connection(2), withPresence: false)
        #expect(state.applyRemote(StreamClusterEvent(op: .join, instance: "a#1", user: "zed"), channel: Self.game, node: "a", wallMillis: Self.wall).isEmpty)
        let actions = state.applyRemote(StreamClusterEvent(op: .join, instance: "b#1", user: "carol"), channel: Self.game, node: "b", wallMillis: Self.wall)
        #expect(Self.sends(actions) == ["remoteJoin carol → [1]"])
        guard case .announce(let sync, _)? = actions.last else {
            Issue.record("no sync")
            return
        }
        #expect(sync.op == .sync && sync.members == ["alice": [:], "bob": [:]])
        // The same run again: known, no second sync.
        #expect(state.applyRemote(StreamClusterEvent(op: .join, instance: "b#1", user: "dave"), channel: Self.game, node: "b", wallMillis: Self.wall)
            .allSatisfy { if case .announce = $0 { false } else { true } })
        let snapshot = state.join(Self.member("erin"), connection: Self.connection(3), quiet: false, withPresence: true, services: [], wallMillis: Self.wall).snapshot
        #expect(snapshot.users == ["alice", "bob", "carol", "dave", "erin"])
    }

    @Test("P-2 across nodes: a remote member who is also a member here is told by nobody; a dead node's members time out (their topics first); a restarted node's earlier run's too")
    func remoteLeaves() {
        var state = Self.state(webhooks: false)
        Self.join(&state, "alice", Self.connection(1))
        Self.join(&state, "carol", Self.connection(2))
        var join = StreamClusterEvent(op: .join, instance: "b#1", user: "carol")
        #expect(Self.sends(state.applyRemote(join, channel: Self.game, node: "b", wallMillis: Self.wall)).isEmpty)
        join.user = "dave"
        _ = state.applyRemote(join, channel: Self.game, node: "b", wallMillis: Self.wall)
        var topic = StreamClusterEvent(op: .joinTopic, instance: "b#1", user: "dave")
        topic.topic = "t"
        #expect(Self.sends(state.applyRemote(topic, channel: Self.game, node: "b", wallMillis: Self.wall)) == ["remoteJoinTopic dave → [1, 2]"])
        #expect(Self.sends(state.remoteNodeStarted("b", instance: "b#1", wallMillis: Self.wall)).isEmpty)   // the same run
        #expect(state.remoteNodeStarted("a", instance: "a#1", wallMillis: Self.wall).isEmpty)   // this node's own start
        #expect(Self.sends(state.remoteNodeDied("b", wallMillis: Self.wall))
            == ["remoteLeaveTopic dave → [1, 2]", "remoteTimeout dave → [1, 2]"])   // carol is here: nothing about her
        #expect(state.remote.isEmpty)
        _ = state.applyRemote(StreamClusterEvent(op: .join, instance: "b#1", user: "erin"), channel: Self.game, node: "b", wallMillis: Self.wall)
        #expect(Self.sends(state.remoteNodeStarted("b", instance: "b#2", wallMillis: Self.wall)) == ["remoteTimeout erin → [1, 2]"])
    }

    @Test("K-3 across nodes: the database link came back: a sync of every channel with members here or announced before (an empty one for a channel left since)")
    func syncAll() {
        var state = Self.state(webhooks: false)
        Self.join(&state, "alice", Self.connection(1))
        let lobby = ChannelKey(appId: "app", name: "lobby")
        let syncs = state.syncAll(announced: [lobby]).compactMap { action -> String? in
            guard case .announce(let event, let channel) = action, event.op == .sync else { return nil }
            return "\(channel.name) \(event.members?.keys.sorted() ?? [])"
        }
        #expect(syncs.sorted() == ["game [\"alice\"]", "lobby []"])
    }

    @Test("K-3 across nodes: a node's mirror of remote stream members as a pure value: join, topic changes, a stale leave, a sync that reconciles")
    func mirrorAsAValue() {
        var members: [String: RemoteStreamMember] = [:]
        func event(_ op: StreamClusterEvent.Op, _ user: String?, instance: String = "a1", _ fill: (inout StreamClusterEvent) -> Void = { _ in }) -> StreamClusterEvent {
            var event = StreamClusterEvent(op: op, instance: instance, user: user)
            fill(&event)
            return event
        }
        func kinds(_ changes: [StreamState.RemoteChange]) -> [String] {
            changes.map { change in ([change.presence?.rawValue] + change.topics.map { "\($0.kind.rawValue)\($0.topics.keys.sorted())" }).compactMap { $0 }.joined(separator: ",") }
        }
        #expect(kinds(StreamState.apply(event(.join, "carol"), to: &members, node: "a")) == ["remoteJoin"])
        #expect(StreamState.apply(event(.join, "carol"), to: &members, node: "a").isEmpty)   // known: nothing
        #expect(kinds(StreamState.apply(event(.joinTopic, "carol") { $0.topic = "t"; $0.meta = "m" }, to: &members, node: "a")) == ["remoteJoinTopic[\"t\"]"])
        // carol moved to node b (run b1): its join there is silent, the old run's leave is stale.
        #expect(StreamState.apply(event(.join, "carol", instance: "b1"), to: &members, node: "b").isEmpty)
        #expect(StreamState.apply(event(.leave, "carol") { $0.reason = "remoteLeave" }, to: &members, node: "a").isEmpty)
        #expect(members["carol"]?.instance == "b1" && members["carol"]?.topics == ["t": "m"])
        #expect(kinds(StreamState.apply(event(.join, "dave"), to: &members, node: "a")) == ["remoteJoin"])
        // A sync of run a1: dave gone, erin new with a topic; carol (run b1) untouched.
        let sync = StreamState.apply(event(.sync, nil) { $0.members = ["erin": ["u": ""]] }, to: &members, node: "a")
        #expect(kinds(sync).sorted() == ["remoteJoin,remoteJoinTopic[\"u\"]", "remoteLeave"])
        #expect(Set(members.keys) == ["carol", "erin"])
        // A sync that changes erin's topics: only topic events.
        let change = StreamState.apply(event(.sync, nil) { $0.members = ["erin": ["v": "x"]] }, to: &members, node: "a")
        #expect(kinds(change) == ["remoteJoinTopic[\"v\"],remoteLeaveTopic[\"u\"]"])
    }
}
