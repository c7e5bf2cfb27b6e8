/// Puts the log's rows back into each channel's sequence order, drops rows already applied, and
/// gives up on a missing number after a bounded wait (an explicit gap, SPEC M-2). A plain value:
/// the follower feeds it rows and the clock, and it returns what to deliver.
///
/// Why rows can arrive out of order: a publish transaction takes its transaction id when it
/// first writes and its channel numbers when it locks each channel's counter. A transaction
/// with an *earlier* id can therefore commit a channel's *later* numbers, and the reader, which
/// moves forward by transaction id (`ChannelLogCursor`), may see number 6 before number 5. Both
/// are committed by then or soon after; the ordering holds 6 until 5 arrives.
public struct ChannelLogOrdering: Sendable {
    /// A run of numbers given up on.
    public struct Gap: Sendable, Equatable {
        public let key: ChannelLogKey
        /// The epoch of the channel's messages after the gap.
        public let epoch: String
        /// The first and last missing numbers.
        public let from: Int64
        public let to: Int64

        public init(key: ChannelLogKey, epoch: String, from: Int64, to: Int64) {
            self.key = key
            self.epoch = epoch
            self.from = from
            self.to = to
        }
    }

    /// What to deliver now, in order per channel, and the gaps declared.
    public struct Output: Sendable {
        public var ready: [ChannelLogEntry] = []
        public var gaps: [Gap] = []
    }

    /// The highest number delivered per channel.
    public private(set) var applied: [ChannelLogKey: Int64]
    private var held: [ChannelLogKey: [Int64: ChannelLogEntry]] = [:]
    /// When each channel's oldest held row arrived.
    private var heldSince: [ChannelLogKey: Int64] = [:]
    /// How long a missing number is waited for before it is declared a gap.
    public let holdbackMillis: Int64

    /// `applied`: each channel's number as committed when following started (rows at or below
    /// are duplicates); channels not in it start at 0.
    public init(applied: [ChannelLogKey: Int64] = [:], holdbackMillis: Int64 = 5_000) {
        self.applied = applied
        self.holdbackMillis = holdbackMillis
    }

    /// Rows held, waiting for a missing number.
    public var heldCount: Int { held.values.reduce(0) { $0 + $1.count } }

    /// Takes rows read from the log (any order); returns those now deliverable.
    public mutating func accept(_ entries: [ChannelLogEntry], nowMillis: Int64) -> Output {
        var output = Output()
        var touched: [ChannelLogKey] = []
        for entry in entries {
            let key = ChannelLogKey(appId: entry.appId, channel: entry.channel)
            let last = applied[key] ?? 0
            guard entry.seq > last else { continue }   // read again (catch-up): delivered already
            if entry.seq == last + 1 && held[key] == nil {
                applied[key] = entry.seq
                output.ready.append(entry)
            } else {
                if held[key] == nil { heldSince[key] = nowMillis }
                held[key, default: [:]][entry.seq] = entry
                touched.append(key)
            }
        }
        for key in touched { release(key, into: &output) }
        return output
    }

    /// Declares gaps for numbers waited on longer than `holdbackMillis` and delivers what
    /// follows them.
    public mutating func expire(nowMillis: Int64) -> Output {
        var output = Output()
        for (key, since) in heldSince where nowMillis - since >= holdbackMillis {
            guard let lowest = held[key]?.keys.min(), let next = held[key]?[lowest] else { continue }
            let last = applied[key] ?? 0
            output.gaps.append(Gap(key: key, epoch: next.epoch, from: last + 1, to: lowest - 1))
            applied[key] = lowest - 1
            release(key, into: &output)
            if held[key] != nil { heldSince[key] = nowMillis }
        }
        return output
    }

    private mutating func release(_ key: ChannelLogKey, into output: inout Output) {
        guard var waiting = held[key] else { return }
        var last = applied[key] ?? 0
        for seq in waiting.keys where seq <= last { waiting[seq] = nil }
        while let next = waiting.removeValue(forKey: last + 1) {
            output.ready.append(next)
            last += 1
        }
        applied[key] = last
        if waiting.isEmpty {
            held[key] = nil
            heldSince[key] = nil
        } else {
            held[key] = waiting
        }
    }
}
