/// The endpoints a client connects to, in a shuffled order: the first
/// connection goes to the first of them; every later attempt (a retry, a reconnection after a
/// loss, a `goaway`) to the next one, round the list, so a client fails over to another node
/// when one dies or drains, with the usual backoff between attempts. The shuffle (seeded
/// like the backoff jitter) spreads a fleet's clients over the nodes. A plain value.
struct EndpointRotation: Sendable {
    /// The endpoints, shuffled.
    let order: [ClientTransport.Endpoint]
    private var index = 0
    private var attempts = 0

    /// `endpoints` must not be empty.
    init(_ endpoints: [ClientTransport.Endpoint], seed: UInt64) {
        precondition(!endpoints.isEmpty, "at least one endpoint")
        var rng = SplitMix64(seed: seed)
        var shuffled = endpoints
        // Fisher–Yates with the seeded generator (tests are deterministic).
        for i in stride(from: shuffled.count - 1, to: 0, by: -1) {
            let j = Int(rng.next() % UInt64(i + 1))
            shuffled.swapAt(i, j)
        }
        self.order = shuffled
    }

    /// Where the current (or last) connection attempt goes.
    var current: ClientTransport.Endpoint { order[index] }

    /// The endpoint for a new connection attempt: the first one for the first attempt, then the
    /// next one in the order each time.
    mutating func nextAttempt() -> ClientTransport.Endpoint {
        if attempts > 0 { index = (index + 1) % order.count }
        attempts += 1
        return order[index]
    }
}
