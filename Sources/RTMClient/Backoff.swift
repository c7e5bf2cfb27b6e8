/// Reconnection backoff (SPEC R-1): 2, 4, 8, … s capped at 64 s, each multiplied by a jitter
/// factor in [0.5, 1.0] so that clients cut at once do not return in lockstep (T-9).
struct Backoff: Sendable {
    let initial: Double
    let cap: Double
    private var rng: SplitMix64

    init(initial: Double, cap: Double, seed: UInt64) {
        self.initial = initial
        self.cap = cap
        self.rng = SplitMix64(seed: seed)
    }

    /// A random delay in [0, `spread`] seconds (a `goaway`'s reconnection spread).
    mutating func spread(_ spread: Double) -> Double { max(spread, 0) * rng.nextUnit() }

    /// Delay in seconds before retry number `attempt` (1-based).
    mutating func delay(attempt: Int) -> Double {
        let exponent = min(max(attempt - 1, 0), 30)
        let base = min(cap, initial * Double(1 << exponent))
        return base * (0.5 + 0.5 * rng.nextUnit())
    }
}

/// A small deterministic random generator (SplitMix64) so backoff is reproducible in tests.
struct SplitMix64: Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func nextUnit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
