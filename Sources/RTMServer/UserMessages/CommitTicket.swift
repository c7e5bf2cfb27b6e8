import NIOConcurrencyHelpers

/// Who answers the senders of one user-message commit: the commit, when it ends in time, or
/// the deadline (`UserMailbox.answerByDeadline`), whichever comes first. Shared by the
/// mailbox's queue (the deadline) and its writer (the commit), so that a commit that has not
/// begun by its deadline never begins, and one that runs past it is answered once.
final class CommitTicket: Sendable {
    private enum State {
        /// Waiting for the writer.
        case queued
        /// On the store.
        case running
        /// Its deadline passed while it ran: its senders were told the outcome is unknown.
        case runningAnswered
        /// Its deadline passed before it began: it never will.
        case abandoned
        /// Ended.
        case done
    }

    /// What the deadline found.
    enum Expiry: Equatable {
        /// The commit had not begun and now never will: nothing is stored.
        case abandoned
        /// The commit runs: its outcome is unknown.
        case answeredRunning
        /// The commit ended first: nothing to do.
        case alreadyDone
    }

    private let state = NIOLockedValueBox(State.queued)

    init() {}

    /// The writer begins the commit; false when its deadline came first (skip it).
    func start() -> Bool {
        state.withLockedValue { state in
            guard case .queued = state else { return false }
            state = .running
            return true
        }
    }

    /// The commit ended; returns whether its senders were answered already (by the deadline).
    func finish() -> Bool {
        state.withLockedValue { state in
            defer { state = .done }
            if case .runningAnswered = state { return true }
            return false
        }
    }

    /// The deadline passed.
    func expire() -> Expiry {
        state.withLockedValue { state in
            switch state {
            case .queued:
                state = .abandoned
                return .abandoned
            case .running:
                state = .runningAnswered
                return .answeredRunning
            case .runningAnswered, .abandoned, .done:
                return .alreadyDone
            }
        }
    }
}
