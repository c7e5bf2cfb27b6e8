import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// A channel's numbers, resends and replay as a value, time passed in (SPEC M-2, M-3).
struct HubStateChannelTests {
    private let room = ChannelKey(appId: "app", name: "room")
    private let alice = UserKey(appId: "app", userId: "alice")
    private let allocator = ByteBufferAllocator()

    private static func outgoing(_ text: String, msgId: UInt64? = nil) -> Hub.Outgoing {
        Hub.Outgoing(requestID: 1, msgId: msgId, customType: nil, isText: true, payload: ByteBuffer(string: text))
    }

    private static func state(window: TimeAmount = .seconds(30), max: Int = 32) -> HubState {
        var configuration = ServerConfiguration()
        configuration.channelReplayWindow = window
        configuration.channelReplayMax = max
        return HubState(configuration: configuration)
    }

    /// Publishes `texts` (one message each) at `millis`; returns their numbers.
    private func publish(_ state: inout HubState, _ texts: [String], msgIds: [UInt64?]? = nil, at millis: Int64) -> [UInt64] {
        let messages = texts.enumerated().map { Self.outgoing($0.element, msgId: msgIds?[$0.offset]) }
        return state.publish(messages, channel: room, publisher: alice, nowMillis: millis, dropSeq: nil, allocator: allocator).seqs
    }

    /// Replayed frames (one per run of one publisher at one time).
    private static func count(_ replay: HubState.Replay) -> Int { replay.messages.count }

    @Test("M-2: numbers are dense per channel; M-3: a resend (same msgId) gets its first number and is not delivered again")
    func numbersAndResends() {
        var state = Self.state()
        #expect(publish(&state, ["a", "b"], msgIds: [10, 11], at: 0) == [1, 2])
        let again = state.publish([Self.outgoing("b", msgId: 11), Self.outgoing("c", msgId: 12)], channel: room, publisher: alice,
                                  nowMillis: 1, dropSeq: nil, allocator: allocator)
        #expect(again.seqs == [2, 3])
        #expect(state.publishedMessages == 3)
        // Another publisher's ids are its own.
        let bob = state.publish([Self.outgoing("x", msgId: 11)], channel: room, publisher: UserKey(appId: "app", userId: "bob"),
                                nowMillis: 2, dropSeq: nil, allocator: allocator)
        #expect(bob.seqs == [4])
    }

    @Test("M-3: a publisher's message ids outlive its last session by publishResendWindow: a resend from its next session gets the first number; after the window they are forgotten")
    func idsOutliveTheSession() {
        var configuration = ServerConfiguration()
        configuration.publishResendWindow = .seconds(60)
        var state = HubState(configuration: configuration)
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        func login(_ key: UserKey, id: UInt64) {
            _ = state.login(key: key, connection: ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: 0), resumeToken: nil,
                            heartbeat: .seconds(5), presenceTimeout: .seconds(15), now: now, wallMillis: 0)
        }
        let bob = UserKey(appId: "app", userId: "bob")
        login(alice, id: 1)
        #expect(publish(&state, ["a"], msgIds: [10], at: 0) == [1])
        _ = state.endSession(alice, event: .remoteLeave, wallMillis: 1_000)   // logged out: no session anywhere
        #expect(state.resends.retention.pending == 1)
        login(alice, id: 2)   // its next session resends
        #expect(publish(&state, ["a"], msgIds: [10], at: 2_000) == [1])
        #expect(publish(&state, ["b"], msgIds: [11], at: 2_000) == [2])
        _ = state.endSession(alice, event: .remoteLeave, wallMillis: 3_000)
        // Another user's session ends just before the window: alice's ids stay.
        login(bob, id: 3)
        _ = state.endSession(bob, event: .remoteLeave, wallMillis: 62_999)
        #expect(publish(&state, ["b"], msgIds: [11], at: 62_999) == [2])
        // After it: forgotten (the same id is a new message now).
        login(bob, id: 4)
        _ = state.endSession(bob, event: .remoteLeave, wallMillis: 63_001)
        #expect(state.resends.ids[alice] == nil && state.resends.retention.pending == 0)
        #expect(publish(&state, ["b"], msgIds: [11], at: 63_001) == [3])
    }

    @Test("M-3: the retention of publishers' ids as a value: deadlines in time order, a later end supersedes an earlier one")
    func retentionAsAValue() {
        var retention = ResendMemoryRetention()
        let bob = UserKey(appId: "app", userId: "bob")
        retention.sessionsEnded(alice, nowMillis: 0, windowMillis: 100)
        retention.sessionsEnded(bob, nowMillis: 10, windowMillis: 100)
        retention.sessionsEnded(alice, nowMillis: 50, windowMillis: 100)   // alice came back and left again
        #expect(retention.due(nowMillis: 99).isEmpty)
        #expect(retention.due(nowMillis: 110) == [bob])   // alice's first deadline was superseded
        #expect(retention.isPending(alice) && !retention.isPending(bob))
        #expect(retention.due(nowMillis: 150) == [alice] && retention.pending == 0)
    }

    @Test("M-2: a returning subscriber in the same epoch gets the retained messages after its position, and a gap with the exact count of those no longer retained")
    func replayInTheSameEpoch() {
        var state = Self.state(max: 3)
        _ = publish(&state, ["1", "2", "3", "4", "5"], at: 1_000)
        let epoch = state.channels[room]!.epoch
        var replay = state.replay(room, after: ChannelPosition(epoch: epoch, seq: 4), nowMillis: 1_000)
        #expect(replay.lost == nil && replay.epoch == epoch)
        #expect(!replay.messages.isEmpty)   // message 5
        replay = state.replay(room, after: ChannelPosition(epoch: epoch, seq: 0), nowMillis: 1_000)
        #expect(replay.lost == .some(2))   // 1 and 2 are past the count limit; 3-5 replayed
        replay = state.replay(room, after: ChannelPosition(epoch: epoch, seq: 5), nowMillis: 1_000)
        #expect(replay.lost == nil && replay.messages.isEmpty)
    }

    @Test("M-2: messages older than the replay window are not replayed; they are counted lost")
    func replayWindow() {
        var state = Self.state(window: .seconds(30))
        _ = publish(&state, ["1", "2"], at: 0)
        _ = publish(&state, ["3"], at: 20_000)
        let epoch = state.channels[room]!.epoch
        let replay = state.replay(room, after: ChannelPosition(epoch: epoch, seq: 0), nowMillis: 40_000)
        #expect(replay.lost == .some(2))
        #expect(Self.count(replay) == 1)
    }

    @Test("M-2: a namespace's replay-window and replay-max apply to its channels; other channels keep the server's")
    func replayPerNamespace() throws {
        var configuration = ServerConfiguration()
        configuration.channelReplayWindow = .seconds(30)
        configuration.channelReplayMax = 2
        configuration.namespaces = [try ChannelNamespace(parsing: "room:replay-window=120,replay-max=10"),
                                    try ChannelNamespace(parsing: "ticker.*:replay-max=0")]
        var state = HubState(configuration: configuration)
        _ = publish(&state, ["1", "2", "3", "4"], at: 0)
        let epoch = state.channels[room]!.epoch
        // 100 s later: past the server's 30 s, within the namespace's 120 s; all 4 kept (past the server's 2).
        var replay = state.replay(room, after: ChannelPosition(epoch: epoch, seq: 0), nowMillis: 100_000)
        #expect(replay.lost == nil && Self.count(replay) == 1)
        #expect(state.channels[room]?.recent.count == 4)
        replay = state.replay(room, after: ChannelPosition(epoch: epoch, seq: 0), nowMillis: 121_000)
        #expect(replay.lost == .some(4))
        // A channel outside keeps the server's limits; one in a replay-max=0 namespace keeps nothing.
        for (name, kept) in [("lobby", 2), ("ticker.eur", 0)] {
            let key = ChannelKey(appId: "app", name: name)
            _ = state.publish(["a", "b", "c"].map { Self.outgoing($0) }, channel: key, publisher: alice, nowMillis: 0, dropSeq: nil, allocator: allocator)
            #expect((state.channels[key]?.recent.count ?? 0) == kept, "\(name)")
        }
        #expect(throws: NamespaceError.self) { try ChannelNamespace(parsing: "x:replay-window=-1") }
        #expect(throws: NamespaceError.self) { try ChannelNamespace(parsing: "x:replay-max=many") }
    }

    @Test("M-2: a position from another epoch (the server restarted, the channel forgotten) gets a gap of unknown size and what is retained")
    func replayAcrossEpochs() {
        var state = Self.state()
        _ = publish(&state, ["1"], at: 0)
        let replay = state.replay(room, after: ChannelPosition(epoch: "an-older-run-1", seq: 7), nowMillis: 0)
        #expect(replay.lost == .some(nil) && Self.count(replay) == 1)
        let unknown = state.replay(ChannelKey(appId: "app", name: "nobody-here"), after: ChannelPosition(epoch: "e", seq: 3), nowMillis: 0)
        #expect(unknown.lost == .some(nil) && unknown.messages.isEmpty)
    }
}
