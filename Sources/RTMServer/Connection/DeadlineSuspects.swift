/// Deadlines found passed, each confirmed only once its event loop has read every socket since
/// (SPEC T-3, PROTOCOL §3: a connection is dropped only when the server has read nothing at
/// all from it). When the loop falls behind, a client's ping can sit unread in its socket past
/// the deadline; the sweep that finds the deadline passed marks the connection, and only if no
/// whole frame has moved its deadline after two more completed ticks (so one whole I/O pass
/// began after the mark) is the deadline acted on. A pure value: tick counts are passed in.
struct DeadlineSuspects<ID: Hashable> {
    /// Each suspect's completed tick count when its deadline was first found passed.
    private var marks: [ID: UInt64] = [:]

    /// No connection waits for confirmation.
    var isEmpty: Bool { marks.isEmpty }

    /// The connections waiting for confirmation.
    var ids: [ID] { Array(marks.keys) }

    /// `id`'s deadline is passed and `completedTicks` ticks have completed: true when that is
    /// now confirmed (the mark is dropped), false while it waits for an I/O pass.
    mutating func passed(_ id: ID, completedTicks: UInt64) -> Bool {
        guard let mark = marks[id] else {
            marks[id] = completedTicks
            return false
        }
        guard completedTicks >= mark &+ 2 else { return false }
        marks[id] = nil
        return true
    }

    /// `id` is no longer suspect: a frame moved its deadline, or it closed.
    mutating func clear(_ id: ID) {
        marks[id] = nil
    }
}
