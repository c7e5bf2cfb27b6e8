import NIOCore
import RTMProtocol
import Testing
@testable import RTMServer

/// Where a channel a node holds nothing of starts (SPEC M-2), as a pure value.
struct ChannelEpochsTests {
    private let room = ChannelKey(appId: "app", name: "room")
    private let quiet = ChannelKey(appId: "app", name: "quiet")

    @Test("M-2: a single node starts each channel it holds nothing of in a new incarnation of its run epoch; forgetting keeps nothing")
    func singleNode() {
        var epochs = ChannelEpochs(runEpoch: "r")
        #expect(epochs.start(room) == ChannelPosition(epoch: "r-1", seq: 0))
        epochs.forget(room, at: ChannelPosition(epoch: "r-1", seq: 9))
        #expect(epochs.start(room) == ChannelPosition(epoch: "r-2", seq: 0))
        #expect(epochs.forgottenCount == 0)
    }

    @Test("M-2: in a cluster a channel starts at the position the backplane reported or the node forgot, else at the cluster's first epoch; a failover changes the first epoch only")
    func cluster() {
        var epochs = ChannelEpochs(runEpoch: "r")
        epochs.apply(BackplanePositions(channels: [.init(appId: "app", channel: "room", epoch: "pg1.00000001", seq: 41),
                                                   .init(appId: "", channel: "control", epoch: "x", seq: 3)],
                                        firstEpoch: "pg1.00000001"))
        #expect(epochs.start(room) == ChannelPosition(epoch: "pg1.00000001", seq: 41))
        #expect(epochs.start(quiet) == ChannelPosition(epoch: "pg1.00000001", seq: 0))
        #expect(epochs.forgottenCount == 1)   // the cluster's own control channel is not a channel
        epochs.forget(quiet, at: ChannelPosition(epoch: "pg1.00000001", seq: 5))
        #expect(epochs.start(quiet) == ChannelPosition(epoch: "pg1.00000001", seq: 5))
        // The database failed over: channels without messages start in the new epoch; the
        // others keep theirs until their first message there (a gap of unknown size then).
        epochs.apply(BackplanePositions(channels: [], firstEpoch: "pg1.00000002"))
        #expect(epochs.start(ChannelKey(appId: "app", name: "new")) == ChannelPosition(epoch: "pg1.00000002", seq: 0))
        #expect(epochs.start(room) == ChannelPosition(epoch: "pg1.00000001", seq: 41))
        // Forgotten at the first epoch's start: nothing to keep.
        epochs.forget(quiet, at: ChannelPosition(epoch: "pg1.00000002", seq: 0))
        #expect(epochs.forgottenCount == 1)
    }

    @Test("M-2: a cluster node that forgets an unused channel answers the next subscribe, and a replay, at the channel's cluster position")
    func hubForgetsAndRemembers() {
        var state = HubState(configuration: ServerConfiguration())
        state.channels.apply(BackplanePositions(channels: [], firstEpoch: "E"))
        #expect(state.channelPosition(room) == ChannelPosition(epoch: "E", seq: 0))
        state.setLoop(0, hasSubscribers: true, channel: room)
        let messages = (1...3).map {
            BackplaneMessage(appId: "app", channel: "room", seq: UInt64($0), epoch: "E", publisher: "p", customType: nil, isText: true,
                             payload: ByteBuffer(string: "m\($0)"), millis: Hub.wallMillis)
        }
        _ = state.applyCommitted(messages[...], channel: room, allocator: ByteBufferAllocator())
        state.channels.dropReplay(room)   // the replay window passed
        state.setLoop(0, hasSubscribers: false, channel: room)
        #expect(state.channels[room] == nil)
        #expect(state.channelPosition(room) == ChannelPosition(epoch: "E", seq: 3))
        // A subscriber back from seq 1 missed 2 messages this node no longer has.
        #expect(state.replay(room, after: ChannelPosition(epoch: "E", seq: 1), nowMillis: Hub.wallMillis).lost == .some(2))
    }
}
