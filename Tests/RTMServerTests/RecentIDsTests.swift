import Testing
@testable import RTMServer

/// The resend memory behind publish deduplication (SPEC M-3).
struct RecentIDsTests {
    @Test("M-3: remembers the last `capacity` ids, increasing or not, and forgets the oldest")
    func remembers() {
        var recent = RecentIDs<UInt64>(capacity: 3)
        #expect(recent[1] == nil)
        for id in [10, 11, 12] as [UInt64] { recent.remember(id, id * 2) }
        #expect(recent[11] == 22)
        #expect(recent[13] == nil)          // above every remembered id: new
        recent.remember(13, 26)             // evicts 10
        #expect(recent[10] == nil)
        #expect(recent[12] == 24 && recent[13] == 26)
        recent.remember(5, 50)              // a client numbering otherwise still works
        #expect(recent[5] == 50)
        #expect(recent[11] == nil)          // evicted
        // Once the high ids have left, the fast path ("above every remembered id") holds again.
        for id in [6, 7, 8] as [UInt64] { recent.remember(id, id) }
        #expect(recent[9] == nil && recent[7] == 7 && recent[13] == nil)
    }

    @Test("M-3: a client that restarts lower is looked up by index, not by scanning the ring, and evictions keep the index right")
    func restartedClientUsesTheIndex() {
        var recent = RecentIDs<UInt64>(capacity: 4)
        for id in [1000, 1001, 1002, 1003] as [UInt64] { recent.remember(id, id) }
        #expect(recent[1004] == nil)
        #expect(!recent.isIndexed)                 // increasing ids: no index, no hashing
        // A new instance of the same user starts lower: every id is at or below the highest.
        #expect(recent[7] == nil)
        #expect(recent.isIndexed)
        for id in [7, 8, 9] as [UInt64] {
            recent.remember(id, id * 10)           // evicts 1000, 1001, 1002
        }
        #expect(recent[1000] == nil && recent[1001] == nil && recent[1002] == nil)
        #expect(recent[1003] == 1003)
        #expect(recent[8] == 80 && recent[9] == 90)
        recent.remember(10, 100)                   // evicts 1003, the highest: recomputed
        #expect(recent[1003] == nil && recent[10] == 100 && recent[7] == 70)
        recent.remember(7, 71)                     // the same id again (evicts 7's old slot)
        #expect(recent[7] == 71)
        recent.remember(11, 110)                   // evicts 8
        #expect(recent[8] == nil && recent[7] == 71 && recent[11] == 110)
    }
}
