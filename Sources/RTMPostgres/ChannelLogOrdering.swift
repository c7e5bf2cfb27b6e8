/// Puts the log's rows back into each channel's sequence order, drops rows already applied, and
/// gives up on a missing number after a bounded wait (an explicit gap, SPEC M-2). A plain value:
/// the follower feeds it rows and the clock, and it returns what to deliver.
///
/// Why rows can arrive out of order: a publish transaction takes its transaction id when it
/// first writes and its channel numbers when it locks each channel's counter. A transaction
/// with an *earlier* id can therefore commit a channel's *later* numbers, and the reader, which
/// moves forward by transaction id (`ChannelLogCursor`), may see number 6 before number 5. Both
/// are committed by then or soon after; the ordering holds 6 until 5 arrives.
///
/// **Epochs.** A channel's numbers start again at 1 in a new epoch when the database moves to a
/// new timeline (a standby promoted: what the old primary committed last may be gone). The
/// first row of the new epoch (a later timeline) ends the old one: the old epoch's held rows
/// are delivered after gaps for what they wait for, then a gap of unknown size opens the new
/// epoch, then its rows follow from 1. A row of an older epoch after that is dropped.
public struct ChannelLogOrdering: Sendable {
    /// A run of numbers given up on, or the start of a new epoch.
    public struct Gap: Sendable, Equatable {
        public let key: ChannelLogKey
        /// The epoch of the channel's messages after the gap.
        public let epoch: String
        /// The first and last missing numbers (`to < from`: unknown, a new epoch).
        public let from: Int64
        public let to: Int64

        public init(key: ChannelLogKey, epoch: String, from: Int64, to: Int64) {
            self.key = key
            self.epoch = epoch
            self.from = from
            self.to = to
        }

        /// A new epoch of the channel: what was lost before it is unknown.
        public static func newEpoch(key: ChannelLogKey, epoch: String) -> Gap {
            Gap(key: key, epoch: epoch, from: 1, to: 0)
        }

        /// How many numbers are missing; nil when unknown (a new epoch).
        public var count: Int64? { to >= from ? to - from + 1 : nil }
    }

    /// A channel's epoch and the database timeline it is counted on.
    public struct Epoch: Sendable, Equatable {
        public var epoch: String
        /// `rtm_timeline()` when the epoch was made ("" when unknown: older than the column).
        public var timeline: String

        public init(epoch: String, timeline: String) {
            self.epoch = epoch
            self.timeline = timeline
        }
    }

    /// One thing to deliver, in order.
    public enum Item: Sendable, Equatable {
        case message(ChannelLogEntry)
        case gap(Gap)
    }

    /// What to deliver now, in order per channel: messages and gaps.
    public struct Output: Sendable {
        public var items: [Item] = []
        /// The messages, in order.
        public var ready: [ChannelLogEntry] { items.compactMap { if case .message(let entry) = $0 { entry } else { nil } } }
        /// The gaps, in order.
        public var gaps: [Gap] { items.compactMap { if case .gap(let gap) = $0 { gap } else { nil } } }
    }

    /// The highest number delivered per channel (in its current epoch).
    public private(set) var applied: [ChannelLogKey: Int64]
    /// Each channel's current epoch, when known.
    public private(set) var epochs: [ChannelLogKey: Epoch]
    private var held: [ChannelLogKey: [Int64: ChannelLogEntry]] = [:]
    /// When each channel's oldest held row arrived.
    private var heldSince: [ChannelLogKey: Int64] = [:]
    /// How long a missing number is waited for before it is declared a gap.
    public let holdbackMillis: Int64
    /// Rows of an epoch that had ended when they were read (dropped).
    public private(set) var staleCount = 0

    /// `applied`: each channel's number as committed when following started (rows at or below
    /// are duplicates); channels not in it start at 0. `epochs`: their epochs then.
    public init(applied: [ChannelLogKey: Int64] = [:], epochs: [ChannelLogKey: Epoch] = [:], holdbackMillis: Int64 = 5_000) {
        self.applied = applied
        self.epochs = epochs
        self.holdbackMillis = holdbackMillis
    }

    /// Rows held, waiting for a missing number.
    public var heldCount: Int { held.values.reduce(0) { $0 + $1.count } }

    /// Takes rows read from the log (in log order); returns what is now deliverable.
    public mutating func accept(_ entries: [ChannelLogEntry], nowMillis: Int64) -> Output {
        var output = Output()
        var touched: [ChannelLogKey] = []
        for entry in entries {
            let key = ChannelLogKey(appId: entry.appId, channel: entry.channel)
            let timeline = entry.timeline ?? ""
            if let current = epochs[key], current.epoch != entry.epoch {
                guard timeline > current.timeline else {
                    staleCount += 1   // an epoch that has ended
                    continue
                }
                endEpoch(key, into: &output)
                epochs[key] = Epoch(epoch: entry.epoch, timeline: timeline)
                output.items.append(.gap(.newEpoch(key: key, epoch: entry.epoch)))
            } else if epochs[key] == nil {
                epochs[key] = Epoch(epoch: entry.epoch, timeline: timeline)
            }
            let last = applied[key] ?? 0
            guard entry.seq > last else { continue }   // read again (catch-up): delivered already
            if entry.seq == last + 1 && held[key] == nil {
                applied[key] = entry.seq
                output.items.append(.message(entry))
            } else {
                if held[key] == nil { heldSince[key] = nowMillis }
                held[key, default: [:]][entry.seq] = entry
                touched.append(key)
            }
        }
        for key in touched { release(key, into: &output) }
        return output
    }

    /// The node starts following `key` from `seq` in `epoch` (its number as committed when the
    /// follow began): rows at or below it are delivered already, what was held of it goes.
    public mutating func start(_ key: ChannelLogKey, epoch: Epoch, seq: Int64) {
        applied[key] = seq
        epochs[key] = epoch
        held[key] = nil
        heldSince[key] = nil
    }

    /// The node stops following `key`: nothing of it is kept (a later `start` says where it is).
    public mutating func forget(_ key: ChannelLogKey) {
        applied[key] = nil
        epochs[key] = nil
        held[key] = nil
        heldSince[key] = nil
    }

    /// Declares gaps for numbers waited on longer than `holdbackMillis` and delivers what
    /// follows them.
    public mutating func expire(nowMillis: Int64) -> Output {
        var output = Output()
        for (key, since) in heldSince where nowMillis - since >= holdbackMillis {
            skipToLowestHeld(key, into: &output)
            release(key, into: &output)
            if held[key] != nil { heldSince[key] = nowMillis }
        }
        return output
    }

    /// The channel's epoch ends: its held rows are delivered, each run of missing numbers
    /// before them declared a gap; the new epoch counts from 0.
    private mutating func endEpoch(_ key: ChannelLogKey, into output: inout Output) {
        while held[key] != nil {
            skipToLowestHeld(key, into: &output)
            release(key, into: &output)
        }
        applied[key] = 0
    }

    /// A gap up to the lowest held number.
    private mutating func skipToLowestHeld(_ key: ChannelLogKey, into output: inout Output) {
        guard let lowest = held[key]?.keys.min(), let next = held[key]?[lowest] else { return }
        let last = applied[key] ?? 0
        output.items.append(.gap(Gap(key: key, epoch: next.epoch, from: last + 1, to: lowest - 1)))
        applied[key] = lowest - 1
    }

    private mutating func release(_ key: ChannelLogKey, into output: inout Output) {
        guard var waiting = held[key] else { return }
        var last = applied[key] ?? 0
        for seq in waiting.keys where seq <= last { waiting[seq] = nil }
        while let next = waiting.removeValue(forKey: last + 1) {
            output.items.append(.message(next))
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
