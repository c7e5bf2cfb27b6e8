import Atomics
import NIOCore
import NIOPosix

/// One event loop's ticks as NIO reports them (each tick: one I/O pass over every ready socket,
/// then the due tasks). Two facts the connections need when the server falls behind:
/// - **Has the loop read every socket since?** Once two more ticks have completed, an I/O pass
///   that started after a given moment has run: a socket that had bytes then was read
///   (`LoopLiveness` confirms a passed deadline this way, SPEC T-3: a connection with bytes
///   waiting is not silent).
/// - **How late does it read?** Bytes read now may have waited since the end of the tick before
///   the last (`lateness`), so the publish rate limit does not count a compliant stream read
///   late as a burst.
///
/// Confined to its event loop (NIO calls the delegate on the loop's thread).
final class LoopTicks: @unchecked Sendable {
    /// Ticks completed.
    private(set) var completed: UInt64 = 0
    /// The loop's group reports its ticks here (set when the server installs the observer).
    private(set) var observed = false
    private var lastEnd = NIODeadline.now()
    private var previousEnd = NIODeadline.now()

    /// A tick ended at `end`.
    func ticked(end: NIODeadline) {
        observed = true
        completed &+= 1
        previousEnd = lastEnd
        lastEnd = end
    }

    /// How long bytes read at `now` may have waited in their socket while the loop worked
    /// elsewhere: since the end of the tick before the last (the loop's sleep included when
    /// it is idle, so at most about one sweep interval then), at most `limit`.
    func lateness(now: NIODeadline, limit: TimeAmount = .seconds(60)) -> TimeAmount {
        guard observed else { return .zero }
        return min(max(now - previousEnd, .zero), limit)
    }
}

/// The server's event loop group's metrics delegate: hands each tick to its loop's `LoopTicks`
/// (installed once the loops exist; ticks before that are not counted).
final class TickObserver: NIOEventLoopMetricsDelegate {
    final class Registry: @unchecked Sendable {
        let ticks: [ObjectIdentifier: LoopTicks]
        init(_ ticks: [ObjectIdentifier: LoopTicks]) { self.ticks = ticks }
    }

    private let registry = ManagedAtomicLazyReference<Registry>()

    /// The loops' tick counters, by loop.
    func install(_ ticks: [ObjectIdentifier: LoopTicks]) {
        _ = registry.storeIfNilThenLoad(Registry(ticks))
    }

    func processedTick(info: NIOEventLoopTickInfo) {
        registry.load()?.ticks[info.eventLoopID]?.ticked(end: info.endTime)
    }
}
