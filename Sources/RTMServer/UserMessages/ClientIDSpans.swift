/// Where one sender's recorded client message ids lie (SPEC M-3): a few intervals covering
/// every id recorded within the resend window, so that a message whose id lies outside them
/// is known not to be a resend without reading the store. A pure value; the embedded store
/// keeps one per recent sender (`SQLiteResendRecords`).
///
/// Conservative by design: an interval may cover ids never recorded (runs closer than
/// `mergeGap` are merged, and at most `maxIntervals` are kept), never the other way round, so a
/// message inside one is checked exactly against the store, and one outside is certainly new.
/// An SDK numbers its messages upwards from a random start (`RTMClient`), so its next ids lie
/// just above its one interval; a restarted SDK starts a second one.
struct ClientIDSpans: Sendable, Equatable {
    /// One covered interval, and when the last id inside it was recorded (ms).
    struct Interval: Sendable, Equatable {
        var low: Int64
        var high: Int64
        var recordedAt: Int64
    }

    /// Runs this close to an interval extend it instead of starting another.
    static let mergeGap: Int64 = 1 << 16
    /// More intervals than this: the two closest are merged.
    static let maxIntervals = 4

    /// Sorted by `low`, disjoint.
    private(set) var intervals: [Interval] = []

    /// No ids recorded.
    init() {}

    /// Whether `id` may have been recorded (it lies in an interval).
    func mayContain(_ id: Int64) -> Bool {
        intervals.contains { $0.low <= id && id <= $0.high }
    }

    /// Ids `low...high` were recorded at `now` (ms).
    mutating func record(_ low: Int64, _ high: Int64, at now: Int64) {
        var merged = Interval(low: low, high: high, recordedAt: now)
        // Every interval within the gap of the new run joins it.
        intervals.removeAll { other in
            guard Self.distance(other, merged) <= Self.mergeGap else { return false }
            merged = Self.union(other, merged)
            return true
        }
        intervals.append(merged)
        intervals.sort { $0.low < $1.low }
        while intervals.count > Self.maxIntervals {
            // Merge the neighbours with the smallest gap between them.
            var closest = 0
            for i in 1..<(intervals.count - 1) where Self.distance(intervals[i], intervals[i + 1]) < Self.distance(intervals[closest], intervals[closest + 1]) {
                closest = i
            }
            intervals[closest] = Self.union(intervals[closest], intervals[closest + 1])
            intervals.remove(at: closest + 1)
        }
    }

    /// Forgets intervals whose last id was recorded before `since` (ms): everything in them
    /// is out of the resend window. Returns whether any interval is left.
    mutating func forget(before since: Int64) -> Bool {
        intervals.removeAll { $0.recordedAt < since }
        return !intervals.isEmpty
    }

    /// Ids strictly between two intervals (0 when they touch or overlap), saturating.
    private static func distance(_ a: Interval, _ b: Interval) -> Int64 {
        let (lower, upper) = a.low <= b.low ? (a, b) : (b, a)
        if upper.low <= lower.high { return 0 }
        let (gap, overflow) = upper.low.subtractingReportingOverflow(lower.high)
        return overflow ? .max : gap - 1
    }

    private static func union(_ a: Interval, _ b: Interval) -> Interval {
        Interval(low: min(a.low, b.low), high: max(a.high, b.high), recordedAt: max(a.recordedAt, b.recordedAt))
    }
}
