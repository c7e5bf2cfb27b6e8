import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// Call invitations on a single node and in a cluster, the same requests and time: the
/// outcomes must not differ (§1.8). A cluster keeps no invitation store: its seam is the log
/// (`HubState+InvitationLog`), so the comparable unit is the node. A single node's `HubState`
/// applies each request at once; a cluster node's writes it to the log and applies the log (as
/// the backplane hands it back). Pure values, time passed in.
@Suite("Invitation contract: single node and cluster node")
struct InvitationModesContractTests {
    /// A node taking invitation requests, at wall-clock times in ms (one time for both clocks).
    struct Node {
        var state: HubState
        let clustered: Bool
        /// Invitation timers asked for and not yet fired.
        var timers: [(key: InvitationTable.Key, at: NIODeadline)] = []
        var seq: UInt64 = 0
        let loop = EmbeddedEventLoop()

        init(clustered: Bool) {
            state = HubState(configuration: ServerConfiguration())
            self.clustered = clustered
            if clustered {
                state.cluster = ClusterReplica(instance: "a#1", clusterNode: "a")
                _ = state.replayInvitations([], now: .uptimeNanoseconds(0), wallMillis: 0)
            }
        }

        static func at(_ millis: Int64) -> NIODeadline { .uptimeNanoseconds(UInt64(millis) * 1_000_000) }

        /// Runs a request and returns its reply: a single node's among its actions, a cluster
        /// node's once its event came back through the log.
        mutating func request(_ type: FrameType, _ id: String, by user: String, callee: String? = nil, text: String? = nil,
                              at millis: Int64) -> InvitationReply? {
            let frame = Frame(type: type, userId: callee, text: text).with { $0.invitationId = id }
            let promise = loop.makePromise(of: InvitationReply.self)
            let actions = state.invitationRequest(frame, user: UserKey(appId: "app", userId: user), now: Self.at(millis),
                                                  wallMillis: millis, reply: promise)
            note(actions)
            return answer(actions + applyLog(at: millis))
        }

        /// Fires the timers due by `millis`, in time order.
        mutating func runTimers(until millis: Int64) {
            while let next = timers.enumerated().filter({ $0.element.at <= Self.at(millis) }).min(by: { $0.element.at < $1.element.at }) {
                timers.remove(at: next.offset)
                let due = next.element.at.uptimeNanoseconds / 1_000_000
                note(state.invitationTimerFired(next.element.key, now: next.element.at, wallMillis: Int64(due)))
                _ = applyLog(at: Int64(due))
            }
        }

        /// The invitations' states by id.
        var states: [String: InvitationStateMachine.State] {
            Dictionary(uniqueKeysWithValues: state.invitations.invitations.map { ($0.key.id, $0.value.machine.state) })
        }

        /// The log's events written by this node, applied back (a single node writes none).
        private mutating func applyLog(at millis: Int64) -> [HubAction] {
            guard clustered else { return [] }
            let written = state.cluster.takeOutbox().filter { $0.logChannel == InvitationEvent.channel }.map { event in
                seq += 1
                return (seq: seq, event: event)
            }
            let actions = state.applyInvitationLog(written, now: Self.at(millis), wallMillis: millis)
            note(actions)
            return actions
        }

        private mutating func note(_ actions: [HubAction]) {
            for case .schedule(.invitation(let key), let at, _) in actions { timers.append((key, at)) }
        }

        private func answer(_ actions: [HubAction]) -> InvitationReply? {
            actions.compactMap { action -> InvitationReply? in
                guard case .answerInvitation(let promise, let reply) = action else { return nil }
                promise.succeed(reply)
                return reply
            }.first
        }
    }

    /// A scenario's replies (each its event or its refusal code) and the invitations' states at the end.
    struct Transcript: Equatable, CustomStringConvertible {
        var replies: [String] = []
        var states: [String: InvitationStateMachine.State] = [:]
        var description: String { "\(replies) \(states)" }
    }

    /// One scenario: steps on a node.
    struct Scenario: Sendable, CustomTestStringConvertible {
        let name: String
        let steps: @Sendable (inout Node, inout Transcript) -> Void
        let expected: [String: InvitationStateMachine.State]
        var testDescription: String { name }

        func run(clustered: Bool) -> Transcript {
            var node = Node(clustered: clustered)
            var transcript = Transcript()
            steps(&node, &transcript)
            transcript.states = node.states
            return transcript
        }
    }

    static func record(_ reply: InvitationReply?, in transcript: inout Transcript) {
        switch reply {
        case .success(let frame)?: transcript.replies.append(frame.event ?? "ok")
        case .failure(let refusal)?: transcript.replies.append("refused \(refusal.code)")
        case nil: transcript.replies.append("no reply")
        }
    }

    static func invite(_ node: inout Node, _ transcript: inout Transcript, _ id: String = "call", at millis: Int64 = 1_000) {
        record(node.request(.invite, id, by: "alice", callee: "bob", text: "video?", at: millis), in: &transcript)
    }

    static let scenarios: [Scenario] = [
        Scenario(name: "§1.8 create → accept: accepted; a cancel after it is refused", steps: { node, t in
            invite(&node, &t)
            record(node.request(.ackInvitation, "call", by: "bob", at: 1_500), in: &t)
            record(node.request(.acceptInvitation, "call", by: "bob", text: "on my way", at: 2_000), in: &t)
            record(node.request(.cancelInvitation, "call", by: "alice", at: 2_500), in: &t)
        }, expected: ["call": .accepted(response: "on my way")]),
        Scenario(name: "§1.8 create → refuse: refused; the invitation's resend is answered with where it stands", steps: { node, t in
            invite(&node, &t)
            record(node.request(.refuseInvitation, "call", by: "bob", text: "busy", at: 2_000), in: &t)
            invite(&node, &t, at: 3_000)
        }, expected: ["call": .refused(response: "busy")]),
        Scenario(name: "§1.8 create → cancel: canceled; an accept after it is refused", steps: { node, t in
            invite(&node, &t)
            record(node.request(.cancelInvitation, "call", by: "alice", at: 2_000), in: &t)
            record(node.request(.acceptInvitation, "call", by: "bob", at: 2_500), in: &t)
        }, expected: ["call": .canceled]),
        Scenario(name: "§1.8 expire: never delivered, it fails remoteOffline 30 s after the invite, not a millisecond before", steps: { node, t in
            invite(&node, &t)
            node.runTimers(until: 30_999)
            t.replies.append("\(node.states["call"].map { "\($0)" } ?? "none") at 30.999 s")
            node.runTimers(until: 31_000)
        }, expected: ["call": .failed(.remoteOffline)]),
        Scenario(name: "§1.8 expire: received and never answered, it fails 60 s after the invite", steps: { node, t in
            invite(&node, &t)
            record(node.request(.ackInvitation, "call", by: "bob", at: 1_500), in: &t)
            node.runTimers(until: 61_000)
        }, expected: ["call": .failed(.expire)]),
        Scenario(name: "§1.8 requests refused alike: another caller's id, a cancel by the callee, an unknown id", steps: { node, t in
            invite(&node, &t)
            record(node.request(.invite, "call", by: "carol", callee: "bob", at: 1_100), in: &t)
            record(node.request(.cancelInvitation, "call", by: "bob", at: 1_200), in: &t)
            record(node.request(.acceptInvitation, "nope", by: "bob", at: 1_300), in: &t)
        }, expected: ["call": .pending(delivered: false)]),
    ]

    @Test(arguments: scenarios)
    func sameOutcome(_ scenario: Scenario) {
        let single = scenario.run(clustered: false)
        let clustered = scenario.run(clustered: true)
        #expect(single == clustered)
        #expect(single.states == scenario.expected, "\(single)")
        #expect(!single.replies.contains("no reply"), "\(single)")
    }
}
