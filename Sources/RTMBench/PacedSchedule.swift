import NIOCore

/// The fixed-rate publishers of one event loop (`--rate`), each sending at its own phase, driven
/// by one timer.
///
/// Real clients are independent: a thousand users sending 50 messages a second each do not send
/// them at the same instants. So publisher g of N starts g/N of a period after the first, and
/// the loop's timer wakes at the next publisher's due time and lets every publisher that is due
/// send (one request per frame, each frame masked with its own key, as always). A timer per
/// publisher, all started together, had sent the whole load in bursts (every publisher at the
/// same instants) and kept thousands of tasks in the loop's scheduler heap.
/// Confined to its loop.
final class PacedSchedule: @unchecked Sendable {
    private let loop: any EventLoop
    /// In phase order.
    private let publishers: [BenchPublisher]
    /// Each publisher's phase (ns after `start`), ascending.
    private let offsets: [Double]
    private let period: Double
    private let start: UInt64
    private let end: UInt64
    private var cursor = 0
    private var round: UInt64 = 0
    private var finished: [Bool]
    private var remaining: Int
    /// The timer's granularity (ns).
    private let tick: UInt64

    /// `phases`: each publisher's fraction of the period (0 ≤ phase < 1); `rate`: messages per
    /// second per publisher.
    init(loop: any EventLoop, publishers: [(publisher: BenchPublisher, phase: Double)], rate: Double, start: UInt64, end: UInt64,
         tick: TimeAmount = .milliseconds(1)) {
        self.tick = UInt64(tick.nanoseconds)
        let sorted = publishers.sorted { $0.phase < $1.phase }
        self.loop = loop
        self.publishers = sorted.map(\.publisher)
        self.period = 1e9 / rate
        self.offsets = sorted.map { $0.phase * 1e9 / rate }
        self.start = start
        self.end = end
        self.finished = Array(repeating: false, count: sorted.count)
        self.remaining = sorted.count
    }

    /// On the loop: publishing starts at `start` (plus each phase) and ends at `end`.
    func begin() {
        guard !publishers.isEmpty else { return }
        schedule(at: due(cursor, round))
    }

    private func due(_ index: Int, _ round: UInt64) -> UInt64 {
        start + UInt64(Double(round) * period + offsets[index])
    }

    private func schedule(at deadline: UInt64) {
        let now = BenchClock.now()
        loop.scheduleTask(in: .nanoseconds(Int64(deadline > now ? deadline - now : 0))) { [self] in run() }
    }

    private func run() {
        let now = BenchClock.now()
        if now >= end {
            for (index, publisher) in publishers.enumerated() where !finished[index] { publisher.finishPaced() }
            return
        }
        // Every publisher due by now, at most one round per wake (a late loop catches up: each
        // publisher sends what it owes at its turn).
        for _ in 0..<publishers.count {
            guard due(cursor, round) <= now else { break }
            if !finished[cursor], !publishers[cursor].pacedTurn(owed: round + 1) {
                finished[cursor] = true
                remaining -= 1
            }
            cursor += 1
            if cursor == publishers.count {
                cursor = 0
                round += 1
            }
        }
        guard remaining > 0 else { return }
        // Woken at most once per `tick`: the publishers due meanwhile send together.
        schedule(at: min(max(due(cursor, round), now + tick), end))
    }
}
