import NIOConcurrencyHelpers
import NIOCore

/// A clock that moves only when told: an in-memory implementation's time in a contract case
/// (`LockStoreSubject.elapse`).
public final class ManualClock: Sendable {
    private let current: NIOLockedValueBox<NIODeadline>

    /// A clock at `start`.
    public init(start: NIODeadline = .uptimeNanoseconds(1_000_000_000)) {
        current = NIOLockedValueBox(start)
    }

    /// The time now.
    public var now: NIODeadline { current.withLockedValue { $0 } }

    /// Moves the time `seconds` forward.
    public func advance(seconds: Int) {
        current.withLockedValue { $0 = $0 + .seconds(Int64(seconds)) }
    }
}
