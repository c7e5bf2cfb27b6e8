import NIOCore
import Testing
@testable import RTMServer

/// The drain's pacing as a pure value: how many `goaway`s each tick sends, in which order.
struct DrainPacerTests {
    @Test("Drain: 500/s at 100 ms ticks → batches of 50, lowest id first, each connection once")
    func batchesAtRate() {
        var pacer = DrainPacer(rate: 500, interval: .milliseconds(100))
        let open = Array((1...120).map(UInt64.init).reversed())
        #expect(pacer.tick(open: open) == Array(1...50))
        #expect(pacer.tick(open: open) == Array(51...100))
        #expect(pacer.tick(open: open) == Array(101...120))
        #expect(pacer.tick(open: open) == [])
        #expect(pacer.sentCount == 120)
    }

    @Test("Drain: a fraction per tick is carried over (1/s at 100 ms → one every tenth tick); idle ticks do not hoard credit")
    func fractionalRate() {
        var pacer = DrainPacer(rate: 1, interval: .milliseconds(100))
        var sentAt: [Int] = []
        for tick in 1...30 where !pacer.tick(open: [1, 2, 3]).isEmpty { sentAt.append(tick) }
        #expect(sentAt == [10, 20, 30])
        var idle = DrainPacer(rate: 100, interval: .milliseconds(100))
        for _ in 0..<50 { _ = idle.tick(open: []) }
        #expect(idle.tick(open: (1...100).map(UInt64.init)).count == 10)   // no burst after idling
    }

    @Test("Drain: a connection that appears during the drain gets its turn")
    func lateConnection() {
        var pacer = DrainPacer(rate: 20, interval: .milliseconds(100))
        #expect(pacer.tick(open: [5, 6]) == [5, 6])
        #expect(pacer.tick(open: [5, 6, 9]) == [9])
    }
}
