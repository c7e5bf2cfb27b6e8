import NIOCore
import RTMPostgres
import Testing

/// The follower's ordering as a pure value: rows from the log in any order, delivered once, in
/// each channel's order; a number that never comes becomes an explicit gap (SPEC M-2).
struct ChannelLogOrderingTests {
    private func entry(_ channel: String, _ seq: Int64) -> ChannelLogEntry {
        ChannelLogEntry(appId: "app", channel: channel, seq: seq, epoch: "e", publisher: "p", node: "n", msgId: nil,
                        customType: nil, isText: true, payload: ByteBuffer(string: "\(channel)\(seq)"), millis: 0)
    }

    @Test("M-2: rows read out of order are delivered in sequence order, per channel")
    func reorders() {
        var ordering = ChannelLogOrdering()
        var output = ordering.accept([entry("a", 1), entry("a", 3), entry("b", 2), entry("b", 1)], nowMillis: 0)
        #expect(output.ready.map { "\($0.channel)\($0.seq)" } == ["a1", "b1", "b2"])
        #expect(ordering.heldCount == 1)
        output = ordering.accept([entry("a", 2)], nowMillis: 10)
        #expect(output.ready.map { "\($0.channel)\($0.seq)" } == ["a2", "a3"])
        #expect(ordering.heldCount == 0)
    }

    @Test("M-2: rows at or below what was delivered (a catch-up read, the start snapshot) are not delivered twice")
    func dropsDuplicates() {
        var ordering = ChannelLogOrdering(applied: [ChannelLogKey(appId: "app", channel: "a"): 5])
        var output = ordering.accept([entry("a", 4), entry("a", 5), entry("a", 6)], nowMillis: 0)
        #expect(output.ready.map(\.seq) == [6])
        output = ordering.accept([entry("a", 6), entry("a", 7), entry("a", 7)], nowMillis: 0)
        #expect(output.ready.map(\.seq) == [7])
        // Held rows that a later row made stale are dropped too.
        output = ordering.accept([entry("a", 9), entry("a", 9)], nowMillis: 0)
        #expect(output.ready.isEmpty && ordering.heldCount == 1)
    }

    @Test("M-2: a number that never arrives is declared a gap after the hold-back window, and what follows is delivered")
    func gapAfterHoldback() {
        var ordering = ChannelLogOrdering(holdbackMillis: 100)
        _ = ordering.accept([entry("a", 1), entry("a", 4), entry("a", 5)], nowMillis: 0)
        #expect(ordering.expire(nowMillis: 99).gaps.isEmpty)
        let output = ordering.expire(nowMillis: 100)
        #expect(output.gaps == [ChannelLogOrdering.Gap(key: ChannelLogKey(appId: "app", channel: "a"), epoch: "e", from: 2, to: 3)])
        #expect(output.ready.map(\.seq) == [4, 5])
        #expect(ordering.applied[ChannelLogKey(appId: "app", channel: "a")] == 5)
        // The late rows, if they ever come, are not delivered after what followed them.
        #expect(ordering.accept([entry("a", 2)], nowMillis: 200).ready.isEmpty)
    }
}
