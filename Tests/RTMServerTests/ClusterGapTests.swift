import NIOCore
import RTMProtocol
import Testing
@testable import RTMServer

/// M-2 across nodes: numbers the backplane gave up on, applied to a node's channel
/// state as a pure value.
struct ClusterGapTests {
    private func message(_ seq: UInt64, epoch: String = "E") -> BackplaneMessage {
        BackplaneMessage(appId: "app", channel: "room", seq: seq, epoch: epoch, publisher: "p", customType: nil, isText: true,
                         payload: ByteBuffer(string: "m\(seq)"), millis: Hub.wallMillis)
    }

    private let key = ChannelKey(appId: "app", name: "room")

    @Test("M-2: a gap moves the channel past the lost numbers; a returning subscriber from before it is told gap with the count it misses")
    func gapAdvancesPosition() {
        var state = HubState(configuration: ServerConfiguration())
        state.setLoop(0, hasSubscribers: true, channel: key)   // subscribers on this node's first loop
        _ = state.applyCommitted([message(1), message(2), message(3)][...], channel: key, allocator: ByteBufferAllocator())
        // The loops to tell.
        #expect(state.applyGap(BackplaneGap(appId: "app", channel: "room", epoch: "E", from: 4, to: 5), channel: key) == 1)
        #expect(state.channels[key]?.seq == 5)
        // The same gap again (or one already passed): nothing to tell.
        #expect(state.applyGap(BackplaneGap(appId: "app", channel: "room", epoch: "E", from: 4, to: 5), channel: key) == nil)
        let (buffer, count, _) = state.applyCommitted([message(6)][...], channel: key, allocator: ByteBufferAllocator())
        #expect(buffer != nil && count == 1)
        // Replay cannot cover across the gap: from 2, messages 3, 4 and 5 are missed, 6 is replayed.
        let replay = state.replay(key, after: ChannelPosition(epoch: "E", seq: 2), nowMillis: Hub.wallMillis)
        #expect(replay.lost == .some(3) && replay.messages.count == 1)
        // From after the gap: nothing lost.
        #expect(state.replay(key, after: ChannelPosition(epoch: "E", seq: 5), nowMillis: Hub.wallMillis).lost == nil)
    }

    @Test("M-2: a gap in a channel this node has not seen yet takes the cluster's epoch")
    func gapTakesEpoch() {
        var state = HubState(configuration: ServerConfiguration())
        _ = state.applyGap(BackplaneGap(appId: "app", channel: "room", epoch: "E2", from: 1, to: 7), channel: key)
        let (buffer, count, _) = state.applyCommitted([message(8, epoch: "E2")][...], channel: key, allocator: ByteBufferAllocator())
        #expect(state.channels[key]?.epoch == "E2" && state.channels[key]?.seq == 8)
        // Nobody on this node subscribes: nothing is encoded, and the message is kept for replay.
        #expect(buffer == nil && count == 0)
        #expect(state.replay(key, after: ChannelPosition(epoch: "E2", seq: 7), nowMillis: Hub.wallMillis).messages.count == 1)
    }
}
