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
}
