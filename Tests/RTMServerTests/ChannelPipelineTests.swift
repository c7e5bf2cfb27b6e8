import NIOCore
import RTMProtocol
import RTMTestSupport
import Testing
@testable import RTMServer

/// The channel pipeline (SPEC M-2, M-3) as a value: a single node's in-memory log and a
/// cluster's backplane feed the same apply step, so the same messages give the same frames,
/// the same replay and the same resend memory whichever log numbered them.
struct ChannelPipelineTests {
    private let room = ChannelKey(appId: "app", name: "room")
    private let alice = UserKey(appId: "app", userId: "alice")
    private let allocator = ByteBufferAllocator()

    private func outgoing(_ text: String, msgId: UInt64?) -> Hub.Outgoing {
        Hub.Outgoing(requestID: 1, msgId: msgId, customType: text == "c" ? "kind" : nil, isText: text != "b", payload: ByteBuffer(string: text))
    }

    private func state(subscribed: Bool) -> HubState {
        var configuration = ServerConfiguration()
        configuration.channelReplayMax = 32
        var state = HubState(configuration: configuration)
        if subscribed { state.setLoop(0, hasSubscribers: true, channel: room) }
        return state
    }

    @Test("M-2/M-3: the in-memory log and a backplane's commit give the same frames, replay and resend memory")
    func bothLogsApplyAlike() throws {
        let messages = ["a", "b", "c"].enumerated().map { outgoing($0.element, msgId: 100 + UInt64($0.offset)) }
        let now = Hub.wallMillis   // what a backplane's messages are applied at
        var single = state(subscribed: true)
        let published = single.publish(messages, channel: room, publisher: alice, nowMillis: now, dropSeq: nil, allocator: allocator)
        #expect(published.seqs == [1, 2, 3])

        // The same messages as a backplane hands them back, in the single node's epoch.
        var cluster = state(subscribed: true)
        let committed = zip(messages, published.seqs).map { message, seq in
            BackplaneMessage(appId: "app", channel: "room", seq: seq, epoch: published.epoch, publisher: "alice",
                             customType: message.customType, isText: message.isText, payload: message.payload, millis: now,
                             msgId: message.msgId)
        }
        let applied = cluster.applyCommitted(committed[...], channel: room, allocator: allocator)
        #expect(applied.count == 3)
        #expect(try #require(applied.buffer) == (try #require(published.buffer)))

        let position = ChannelPosition(epoch: published.epoch, seq: 0)
        let replayed = single.replay(room, after: position, nowMillis: now).messages
        #expect(replayed.count == 1 && replayed == cluster.replay(room, after: position, nowMillis: now).messages)
        // M-3: both remember the ids with their numbers: a resend gets its first number.
        #expect(single.knownSequenceNumbers(of: [messages[1]], publisher: alice) == [2])
        #expect(cluster.knownSequenceNumbers(of: [messages[1]], publisher: alice) == [2])
    }

    @Test("M-2: without a subscriber on this node a publish is numbered and kept for replay, but encoded for nobody")
    func noSubscriberNoEncoding() {
        var state = state(subscribed: false)
        let published = state.publish([outgoing("a", msgId: nil)], channel: room, publisher: alice, nowMillis: 1, dropSeq: nil, allocator: allocator)
        #expect(published.seqs == [1] && published.buffer == nil && published.loops == 0)
        #expect(state.replay(room, after: ChannelPosition(epoch: published.epoch, seq: 0), nowMillis: 1).messages.count == 1)
        #expect(state.publishedMessages == 1)
    }

    @Test("M-3: the same msgId twice in one read is acknowledged with the first number and delivered once; the replay counts nothing lost")
    func resendWithinOneRead() throws {
        var state = state(subscribed: true)
        let published = state.publish([outgoing("a", msgId: 7), outgoing("a", msgId: 7), outgoing("c", msgId: 8)], channel: room,
                                      publisher: alice, nowMillis: 1, dropSeq: nil, allocator: allocator)
        #expect(published.seqs == [1, 1, 3])
        var delivered: [UInt64] = []
        for frame in RawPeer.frames(in: try #require(published.buffer)) {
            guard case .messages(let items) = try BinaryFrame.decode(ByteBuffer(bytes: frame.payload)) else {
                Issue.record("not a message frame")
                return
            }
            delivered += items.map(\.seq)
        }
        #expect(delivered == [1, 3])
        let replay = state.replay(room, after: ChannelPosition(epoch: published.epoch, seq: 0), nowMillis: 1)
        #expect(replay.lost == nil)
    }
}
