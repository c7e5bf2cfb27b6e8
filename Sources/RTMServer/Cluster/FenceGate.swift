/// Which commits a node may still make after the others declared it dead (P-2 from their
/// side), as a value: every connection belongs to the generation it was accepted in (how many
/// times the node was fenced so far); a fence starts the next generation, refuses every later
/// commit of the earlier ones, and is dealt with only once their commits under way ended.
///
/// The database fences each append too (its `rtm_node` row is marked), but the node lifts that
/// mark when it joins again: without the wait, a commit admitted just before the fence could
/// reach the database just after the lift and be stored for a session the others ended.
struct FenceGate: Sendable {
    /// Times this node was declared dead: the current generation.
    private(set) var generation = 0
    /// Commits under way per generation.
    private var committing: [Int: Int] = [:]
    /// The generation a fence waits for: its commits under way to end.
    private var awaited: Int?

    /// Admits a commit of a connection accepted in `accepted`: false once a fence ended that generation.
    mutating func begin(accepted: Int) -> Bool {
        guard accepted == generation else { return false }
        committing[accepted, default: 0] += 1
        return true
    }

    /// A commit admitted in `accepted` ended (stored or not): true when it was the last one a
    /// fence waits for (the caller resumes it).
    mutating func end(accepted: Int) -> Bool {
        let left = (committing[accepted] ?? 1) - 1
        committing[accepted] = left > 0 ? left : nil
        guard left <= 0, awaited == accepted else { return false }
        awaited = nil
        return true
    }

    /// The others declared this node dead: the next generation starts. Returns whether commits
    /// of the ended one are still under way (then the caller waits for `end` to say so).
    mutating func fence() -> Bool {
        let ended = generation
        generation += 1
        guard (committing[ended] ?? 0) > 0 else { return false }
        awaited = ended
        return true
    }
}
