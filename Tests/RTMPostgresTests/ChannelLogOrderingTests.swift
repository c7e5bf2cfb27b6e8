import NIOCore
import RTMPostgres
import Testing

/// The follower's ordering as a pure value: rows from the log in any order, delivered once, in
/// each channel's order; a number that never comes becomes an explicit gap (SPEC M-2).
@Suite(.realTime)
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

/// A database failover: a channel's numbers start again at 1 in a new epoch on a new timeline.
@Suite(.realTime)
struct ChannelLogOrderingEpochTests {
    private let key = ChannelLogKey(appId: "app", channel: "a")

    private func entry(_ seq: Int64, epoch: String, timeline: String) -> ChannelLogEntry {
        ChannelLogEntry(appId: "app", channel: "a", seq: seq, epoch: epoch, publisher: "p", node: "n", msgId: nil,
                        customType: nil, isText: true, payload: ByteBuffer(string: "\(epoch)\(seq)"), millis: 0, timeline: timeline)
    }

    private func describe(_ output: ChannelLogOrdering.Output) -> [String] {
        output.items.map { item in
            switch item {
            case .message(let entry): "\(entry.epoch)\(entry.seq)"
            case .gap(let gap): "gap \(gap.epoch) \(gap.count.map(String.init) ?? "?")"
            }
        }
    }

    @Test("M-2: the first row of a new epoch on a later timeline ends the old one: its held rows after a gap of known size, then a gap of unknown size, then the new epoch from 1")
    func newEpochOnNewTimeline() {
        var ordering = ChannelLogOrdering(applied: [key: 3], epochs: [key: .init(epoch: "e1", timeline: "00000001")])
        // 4 and 5 were lost with the old primary; 6 was read before the failover and is held.
        #expect(describe(ordering.accept([entry(6, epoch: "e1", timeline: "00000001")], nowMillis: 0)).isEmpty)
        let output = ordering.accept([entry(2, epoch: "e2", timeline: "00000002"), entry(1, epoch: "e2", timeline: "00000002")], nowMillis: 1)
        #expect(describe(output) == ["gap e1 2", "e16", "gap e2 ?", "e21", "e22"])
        #expect(ordering.applied[key] == 2 && ordering.epochs[key]?.epoch == "e2")
        #expect(ordering.heldCount == 0)
    }

    @Test("M-2: a row of an epoch that has ended is dropped, never delivered after the new epoch's")
    func staleEpochDropped() {
        var ordering = ChannelLogOrdering(applied: [key: 0], epochs: [key: .init(epoch: "e2", timeline: "00000002")])
        #expect(describe(ordering.accept([entry(1, epoch: "e2", timeline: "00000002")], nowMillis: 0)) == ["e21"])
        #expect(describe(ordering.accept([entry(7, epoch: "e1", timeline: "00000001")], nowMillis: 0)).isEmpty)
        #expect(ordering.staleCount == 1)
        #expect(describe(ordering.accept([entry(2, epoch: "e2", timeline: "00000002")], nowMillis: 0)) == ["e22"])
    }

    @Test("M-2: a channel first seen in the log takes the epoch of its rows")
    func firstSeen() {
        var ordering = ChannelLogOrdering()
        #expect(describe(ordering.accept([entry(1, epoch: "e1", timeline: "00000001")], nowMillis: 0)) == ["e11"])
        #expect(ordering.epochs[key] == .init(epoch: "e1", timeline: "00000001"))
    }
}
