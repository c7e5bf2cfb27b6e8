import NIOCore
import Testing
@testable import RTMServer

/// `TopicOutbox`: one commit in flight per publisher, the rest batched behind it, bounded.
struct TopicOutboxTests {
    static let alice = StreamMembership(channel: ChannelKey(appId: "app", name: "game"), userId: "alice")
    static let bob = StreamMembership(channel: ChannelKey(appId: "app", name: "game"), userId: "bob")

    static func item(_ text: String) -> TopicOutbox.Item {
        let publish = BackplanePublish(appId: "app", channel: "/stream/game/moves", publisher: "alice", msgId: nil, customType: nil,
                                       isText: true, payload: ByteBuffer(string: text), millis: 0)
        return TopicOutbox.Item(publish: publish, done: { _ in })
    }

    static func texts(_ items: [TopicOutbox.Item]?) -> [String]? {
        items?.map { String(buffer: $0.publish.payload) }
    }

    @Test("the first message starts a drain; messages during its commit wait and go in the next batch, in order; the drain ends when none wait")
    func batchesBehindTheCommitInFlight() {
        let outbox = TopicOutbox()
        #expect(outbox.add(Self.item("1"), for: Self.alice) == .startDrain)
        #expect(Self.texts(outbox.take(for: Self.alice)) == ["1"])   // committing "1"
        #expect(outbox.add(Self.item("2"), for: Self.alice) == .queued)
        #expect(outbox.add(Self.item("3"), for: Self.alice) == .queued)
        #expect(outbox.add(Self.item("b"), for: Self.bob) == .startDrain)   // publishers are independent
        #expect(Self.texts(outbox.take(for: Self.alice)) == ["2", "3"])
        #expect(outbox.take(for: Self.alice) == nil)   // the drain ends
        #expect(outbox.add(Self.item("4"), for: Self.alice) == .startDrain)   // and the next message starts one
    }

    @Test("idle once the last drain ends, not before")
    func idleAfterTheLastDrain() {
        let outbox = TopicOutbox()
        #expect(outbox.isIdle)
        #expect(outbox.add(Self.item("1"), for: Self.alice) == .startDrain)
        #expect(outbox.add(Self.item("b"), for: Self.bob) == .startDrain)
        _ = outbox.take(for: Self.alice)
        #expect(outbox.take(for: Self.alice) == nil)
        #expect(!outbox.isIdle)   // bob's drain still runs
        _ = outbox.take(for: Self.bob)
        #expect(!outbox.isIdle)   // its commit is in flight
        #expect(outbox.take(for: Self.bob) == nil)
        #expect(outbox.isIdle)
    }

    @Test("a publisher with `capacity` messages waiting is refused at once")
    func bounded() {
        let outbox = TopicOutbox(capacity: 2)
        #expect(outbox.add(Self.item("1"), for: Self.alice) == .startDrain)
        #expect(outbox.add(Self.item("2"), for: Self.alice) == .queued)
        #expect(outbox.add(Self.item("3"), for: Self.alice) == .full)
        #expect(Self.texts(outbox.take(for: Self.alice)) == ["1", "2"])
        #expect(outbox.add(Self.item("3"), for: Self.alice) == .queued)
    }
}
