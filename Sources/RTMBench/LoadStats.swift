import Histogram

/// What the subscribers of one event loop saw. Confined to that loop: no locks on the hot path.
final class LoopStats: @unchecked Sendable {
    var deliveries: UInt64 = 0          // within the measured interval
    var allDeliveries: UInt64 = 0       // every message received
    var lost: UInt64 = 0
    var outOfOrder: UInt64 = 0
    /// Messages received a second time (a sequence number at or below the last, not one that
    /// was counted lost).
    var duplicated: UInt64 = 0
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)   // µs
    var second = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    var secondDeliveries: UInt64 = 0
    /// The publishers of this loop: publish → acknowledged (the server has stored the message;
    /// in a cluster, committed to PostgreSQL), µs, for binary publishes sent in the measured
    /// interval. Beside the delivery latency it tells the database's part (its commit, its
    /// disk's flush) from the rest.
    var acked = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    var secondAcked = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
}

/// A run's figures.
public struct LoadResult: Codable, Sendable {
    public var target: String
    /// How the publisher sent: `binary` (PROTOCOL.md §2.3), `json` (`publish` requests) or
    /// `binary sendUser` (user messages, `0x03`).
    public var publishes: String
    /// Shortcuts the run took that real clients do not (`LoadOptions.shortcuts`): a figure with
    /// any is not comparable to honest ones and never goes in the README.
    public var shortcuts: [String]
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
    /// Publish → acknowledged (stored), for binary publishes: nil when the run has none (JSON
    /// publishes, user messages, the floor) or a publish was refused.
    public var acked: LatencyFigures?
    public var lost: UInt64
    public var outOfOrder: UInt64
    /// Messages a subscriber received twice.
    public var duplicated: UInt64
    public var undelivered: UInt64
    public var disconnected: Int
    public var published: UInt64
    public var errors: Int
    public var clientCores: Double
    public var serverCores: Double?
    public var machineCores: Double
    /// User messages: the store's floor, run right after (`rtm bench pairs --users`); nil: none.
    public var storeFloor: StoreFloorFigures?

    /// The human-readable table.
    public var text: String {
        let load = rate > 0 ? "rate=\(Int(rate)) msg/s" : "rate=max"
        var lines = ["\(target)  publishes=\(publishes) groups=\(groups) subs/group=\(subscribersPerGroup) size=\(size)B \(load) measured=\(String(format: "%.2f", measuredSeconds))s"]
        if !shortcuts.isEmpty {
            lines.append("  !!! SHORTCUTS TAKEN, NOT WHAT REAL CLIENTS SEND (not comparable, never for published figures): \(shortcuts.joined(separator: ", "))")
        }
        lines.append("  published/s   \(Int(publishedPerSecond))")
        lines.append("  deliveries/s  \(Int(deliveriesPerSecond))")
        lines.append("  " + LatencyFigures(p50Micros: p50Micros, p99Micros: p99Micros, p999Micros: p999Micros, maxMicros: maxMicros).text)
        if let acked { lines.append("  " + acked.text(label: "acked us     ") + "  (publish → stored)") }
        lines.append("  lost=\(lost) duplicated=\(duplicated) out-of-order=\(outOfOrder) undelivered=\(undelivered) disconnected=\(disconnected) published=\(published) errors=\(errors)")
        let server = serverCores.map { String(format: "%.2f", $0) } ?? "?"
        lines.append("  cpu cores     client=\(String(format: "%.2f", clientCores)) server=\(server) machine=\(String(format: "%.2f", machineCores))")
        if let storeFloor { lines.append(storeFloor.text(againstMessagesPerSecond: publishedPerSecond)) }
        return lines.joined(separator: "\n")
    }
}

/// The floor of `rtm bench pairs --users`: the run's rows inserted and deleted by the store's
/// library directly (SQLite under GRDB, opened as the server opens its store), in the server's
/// batch size, on the same disk.
public struct StoreFloorFigures: Codable, Sendable {
    /// Rows stored (the run's messages).
    public var rows: Int
    /// Rows per transaction: the server's average commit over the run (its
    /// `rtm_user_message_store_commits_total`).
    public var batch: Int
    public var rowsPerSecond: Double
    /// Where its database was.
    public var directory: String

    public init(rows: Int, batch: Int, rowsPerSecond: Double, directory: String) {
        self.rows = rows; self.batch = batch; self.rowsPerSecond = rowsPerSecond; self.directory = directory
    }

    func text(againstMessagesPerSecond rate: Double) -> String {
        "  store floor   \(Int(rowsPerSecond)) rows/s (the same \(rows) rows inserted and deleted in transactions of \(batch), "
            + "the server's average commit, by SQLite under GRDB directly, in \(directory)); "
            + "rtm/floor \(String(format: "%.2f", rate / max(rowsPerSecond, 1)))"
    }
}

/// Latency percentiles of a run, µs.
public struct LatencyFigures: Codable, Sendable {
    /// Median.
    public var p50Micros: Double
    /// 99th percentile.
    public var p99Micros: Double
    /// 99.9th percentile.
    public var p999Micros: Double
    /// The largest seen.
    public var maxMicros: Double
    /// How many were measured (nil where not counted).
    public var count: UInt64?

    init(p50Micros: Double, p99Micros: Double, p999Micros: Double, maxMicros: Double) {
        self.p50Micros = p50Micros; self.p99Micros = p99Micros; self.p999Micros = p999Micros; self.maxMicros = maxMicros
    }

    init(_ histogram: Histogram<UInt64>) {
        p50Micros = Double(histogram.valueAtPercentile(50))
        p99Micros = Double(histogram.valueAtPercentile(99))
        p999Micros = Double(histogram.valueAtPercentile(99.9))
        maxMicros = Double(histogram.max)
        count = histogram.totalCount
    }

    /// `latency us    p50=… p99=… p999=… max=…`.
    public var text: String { text(label: "latency us   ") }

    /// `label p50=… p99=… p999=… max=…`.
    public func text(label: String) -> String {
        func f(_ v: Double) -> String { v >= 100 ? String(Int(v.rounded())) : String(format: "%.1f", v) }
        return "\(label) p50=\(f(p50Micros)) p99=\(f(p99Micros)) p999=\(f(p999Micros)) max=\(f(maxMicros))"
    }
}
