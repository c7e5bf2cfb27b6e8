import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Gives memory back to the system when load ends. The C allocator keeps what the server
/// frees (a flood's buffers, a slow consumer's backlog, thousands of closed connections) for
/// reuse, so without this the process stays at its peak size for ever. Every `interval`, on a
/// queue of its own (never an event loop), it reads the resident size; while that is more than
/// `threshold` above the smallest size seen after a trim (the idle footprint), it asks the
/// allocator to return its free pages (glibc's `malloc_trim`: a few milliseconds at most, a
/// no-op when everything is in use). A platform without `malloc_trim` (macOS, musl) does
/// nothing.
final class MemoryTrimmer: @unchecked Sendable {   // its one mutable field is behind a lock
    private let interval: TimeAmount
    private let threshold: Int
    private let logger: Logger
    private let queue = DispatchQueue(label: "rtm.memory-trimmer", qos: .utility)
    private let state = NIOLockedValueBox<State>(State())

    private struct State: @unchecked Sendable {   // the timer: only touched under the lock
        var timer: (any DispatchSourceTimer)?
        /// The smallest resident size seen after a trim (or at the start).
        var floor = 0
        var trims = 0
        var released = 0
    }

    /// Checks every `interval` (0: never); trims while the resident size is `threshold` bytes
    /// above the idle footprint.
    init(interval: TimeAmount, threshold: Int = 16 << 20, logger: Logger) {
        self.interval = interval
        self.threshold = threshold
        self.logger = logger
    }

    /// Trims done and bytes they gave back (tests, metrics).
    var totals: (trims: Int, releasedBytes: Int) { state.withLockedValue { ($0.trims, $0.released) } }

    /// Starts checking (nothing when the interval is 0 or the platform has no trim).
    func start() {
        guard interval > .zero, Self.trim != nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds = Int(interval.nanoseconds)
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds), leeway: .milliseconds(100))
        timer.setEventHandler { [weak self] in self?.check() }
        state.withLockedValue {
            $0.floor = Self.residentBytes() ?? 0
            $0.timer = timer
        }
        timer.resume()
    }

    /// Stops checking.
    func stop() {
        state.withLockedValue { state in
            state.timer?.cancel()
            state.timer = nil
        }
    }

    /// Trims now if the resident size is past the threshold (on the trimmer's queue).
    private func check() {
        guard let before = Self.residentBytes(), let trim = Self.trim else { return }
        let floor = state.withLockedValue { $0.floor }
        guard before > floor + threshold else { return }
        _ = trim(0)
        let after = Self.residentBytes() ?? before
        state.withLockedValue {
            $0.floor = min($0.floor, after)
            $0.trims += 1
            $0.released += max(0, before - after)
        }
        if before - after > threshold {
            logger.debug("gave memory back to the system", metadata: ["before": "\(before)", "after": "\(after)"])
        }
    }

    /// Asks the allocator to give back every free page now, whatever the threshold (a test's
    /// baseline without what earlier work in the process left free for reuse).
    static func trimNow() {
        _ = trim?(0)
    }

    /// `malloc_trim(pad)`, found at run time (glibc only; not in Swift's Glibc module).
    private static let trim: (@convention(c) (Int) -> Int32)? = {
        #if os(Linux)
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()

    /// The process's resident size in bytes (`/proc/self/statm`), nil where there is none.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
