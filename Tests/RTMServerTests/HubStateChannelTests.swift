import NIOCore
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
