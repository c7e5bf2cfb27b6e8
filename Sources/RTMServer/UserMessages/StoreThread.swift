import Dispatch

/// The one thread a store's blocking calls run on: one call at a time, in the order they were
/// asked for. A store owns it (`UserMessageStore.thread`), so that whoever calls the store never
/// blocks a thread of its own and needs no queue of its own: the mailbox hands a call over and
/// hears of its end through a callback.
public final class StoreThread: Sendable {
    private let queue: DispatchQueue

    /// A thread named `label` (as debuggers and profilers show it).
    public init(label: String) {
        queue = DispatchQueue(label: label)
    }

    /// Runs `call` after every call asked for before it.
    public func run(_ call: @escaping @Sendable () -> Void) {
        queue.async(execute: call)
    }

    /// Waits until every call asked for so far has ended (tests).
    public func waitForCalls() {
        queue.sync {}
    }
}
