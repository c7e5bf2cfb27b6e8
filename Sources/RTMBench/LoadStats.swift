import Histogram

/// What the subscribers of one event loop saw. Confined to that loop: no locks on the hot path.
final class LoopStats: @unchecked Sendable {
    var deliveries: UInt64 = 0          // within the measured interval
    var allDeliveries: UInt64 = 0       // every message received
    var lost: UInt64 = 0
    var outOfOrder: UInt64 = 0
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)   // µs
    var second = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    var secondDeliveries: UInt64 = 0
}

/// A run's figures.
public struct LoadResult: Codable, Sendable {
    public var target: String
    public var groups: Int
    public var subscribersPerGroup: Int
    public var size: Int
    public var rate: Double
    public var measuredSeconds: Double
    public var publishedPerSecond: Double
    public var deliveriesPerSecond: Double
    public var p50Micros: Double
    public var p99Micros: Double
    public var p999Micros: Double
    public var maxMicros: Double
    public var lost: UInt64
    public var outOfOrder: UInt64
    public var undelivered: UInt64
    public var disconnected: Int
    public var published: UInt64
    public var errors: Int
    public var clientCores: Double
    public var serverCores: Double?
    public var machineCores: Double

    /// The human-readable table.
    public var text: String {
        func f(_ v: Double) -> String { v >= 100 ? String(Int(v.rounded())) : String(format: "%.1f", v) }
        let load = rate > 0 ? "rate=\(Int(rate)) msg/s" : "rate=max"
        var lines = ["\(target)  groups=\(groups) subs/group=\(subscribersPerGroup) size=\(size)B \(load) measured=\(String(format: "%.2f", measuredSeconds))s"]
        lines.append("  published/s   \(Int(publishedPerSecond))")
        lines.append("  deliveries/s  \(Int(deliveriesPerSecond))")
        lines.append("  latency us    p50=\(f(p50Micros)) p99=\(f(p99Micros)) p999=\(f(p999Micros)) max=\(f(maxMicros))")
        lines.append("  lost=\(lost) out-of-order=\(outOfOrder) undelivered=\(undelivered) disconnected=\(disconnected) published=\(published) errors=\(errors)")
        let server = serverCores.map { String(format: "%.2f", $0) } ?? "?"
        lines.append("  cpu cores     client=\(String(format: "%.2f", clientCores)) server=\(server) machine=\(String(format: "%.2f", machineCores))")
        return lines.joined(separator: "\n")
    }
}
