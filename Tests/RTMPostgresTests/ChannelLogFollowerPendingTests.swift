import NIOCore
@testable import RTMPostgres
import Testing

/// What a follower keeps between two turns of its loop, as a value.
@Suite(.realTime)
struct ChannelLogFollowerPendingTests {
    private func entry(_ seq: Int64) -> ChannelLogEntry {
        ChannelLogEntry(appId: "app", channel: "room", seq: seq, epoch: "c.1", publisher: "alice", node: "n1", msgId: nil,
                        customType: nil, isText: true, payload: ByteBuffer(string: "x"), millis: 1)
    }

    @Test("M-2: announced messages wait in order for the loop; a plain wake-up asks for a read and keeps them; past the cap they are dropped for a read of the log (memory bounded while delivery stalls)")
    func announcedMessagesAreBounded() {
        var pending = ChannelLogFollower.Pending()
        pending.announce([entry(1), entry(2)])
        pending.announce([entry(3)])
        #expect(pending.entries.map(\.seq) == [1, 2, 3] && !pending.read)
        pending.announce(nil)
        #expect(pending.entries.count == 3 && pending.read)

        var busy = ChannelLogFollower.Pending()
        let notice = (1...100).map { entry(Int64($0)) }
        for _ in 0..<(ChannelLogFollower.Pending.maxEntries / notice.count) { busy.announce(notice) }
        #expect(busy.entries.count == ChannelLogFollower.Pending.maxEntries && !busy.read)
        busy.announce([entry(1)])
        #expect(busy.entries.isEmpty && busy.read)
        busy.announce([entry(2)])   // after the drop: kept again, the read still asked for
        #expect(busy.entries.map(\.seq) == [2] && busy.read)
    }
}
