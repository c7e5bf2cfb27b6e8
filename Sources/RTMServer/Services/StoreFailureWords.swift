/// Why a call to the metadata or history store failed, in words a client may read: never a
/// library's error text (a PostgreSQL driver's says only that it hides its details; the
/// server's log has them). A write that timed out or lost its link may have been applied: the
/// reason says the outcome is unknown.
enum StoreFailureWords {
    /// `failed` names what could not be done ("the store could not be written").
    static func reason(_ failed: String, _ error: any Error, write: Bool) -> String {
        let cause: String
        var outcomeUnknown = false
        switch error {
        case let down as DatabaseLinkDown:
            cause = down.description
        case let timeout as any DatabaseTimeout:
            cause = timeout.description
            outcomeUnknown = write
        case is CancellationError:
            cause = "the database link was lost"
            outcomeUnknown = write
        default:
            cause = "the database failed (the server's log has the details)"
        }
        return outcomeUnknown ? "\(failed): \(cause); the outcome is unknown: read it again before retrying" : "\(failed): \(cause)"
    }
}
