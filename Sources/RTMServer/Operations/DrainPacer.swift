import NIOCore

/// Which connections get their `goaway` at each tick of a drain, as a plain value:
/// `rate × interval` per tick (fractions carried over, so 1 client per second at a 100 ms tick
/// is one every tenth tick), oldest connection first, each connection once. The owner
/// (`RTMServer.drain()`) runs the ticks and sends the frames.
struct DrainPacer: Sendable {
    /// Clients per second.
    let rate: Double
    /// Time between ticks.
    let interval: TimeAmount
    private var credit: Double = 0
    private var sent: Set<UInt64> = []

    /// A pacer of `rate` clients per second in ticks of `interval`; `rate` and `interval` > 0.
    init(rate: Double, interval: TimeAmount) {
        precondition(rate > 0 && interval > .zero, "drain rate and interval must be positive")
        self.rate = rate
        self.interval = interval
    }

    /// Clients per tick, on average.
    var perTick: Double { rate * Double(interval.nanoseconds) / 1e9 }

    /// How many connections were given their `goaway` so far.
    var sentCount: Int { sent.count }

    /// One tick: of the `open` connection ids, the ones to send `goaway` to now (those not sent
    /// one yet, lowest id first, at most this tick's share). Unused credit is not hoarded: a
    /// tick never sends more than one tick's share plus the fraction carried over.
    mutating func tick(open: [UInt64]) -> [UInt64] {
        credit = min(credit + perTick, max(perTick, 1))
        let waiting = open.filter { !sent.contains($0) }.sorted()
        let count = min(waiting.count, Int(credit + 1e-9))   // 10 × 0.1 is 0.999…
        guard count > 0 else { return [] }
        credit = max(credit - Double(count), 0)
        let batch = Array(waiting.prefix(count))
        sent.formUnion(batch)
        return batch
    }
}
