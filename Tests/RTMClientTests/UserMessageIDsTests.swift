import Testing
@testable import RTMClient

/// User-message deduplication as a value (SPEC M-1, M-3): the last id per mailbox epoch.
struct UserMessageIDsTests {
    @Test("M-1: an id at or below the last one of its epoch is a duplicate; the first epoch ever seen is not announced")
    func duplicatesWithinAnEpoch() {
        var ids = UserMessageIDs()
        #expect(ids.receive(1, epoch: "e") == .new)
        #expect(ids.receive(2, epoch: "e") == .new)
        #expect(ids.receive(2, epoch: "e") == .duplicate)
        #expect(ids.receive(1, epoch: "e") == .duplicate)
        #expect(ids.receive(3, epoch: "e") == .new)
    }

    @Test("M-1: a new mailbox epoch is announced once; a message of the earlier epoch sent again afterwards (its ack was lost) is still a duplicate")
    func epochsKeptApart() {
        var ids = UserMessageIDs()
        #expect(ids.receive(40, epoch: "e") == .new)
        #expect(ids.receive(4_294_967_297, epoch: "e.00000002") == .newEpoch("e.00000002"))
        #expect(ids.receive(4_294_967_298, epoch: "e.00000002") == .new)
        // At the next login the store sends the old epoch's unacknowledged message again.
        #expect(ids.receive(40, epoch: "e") == .duplicate)
        #expect(ids.receive(4_294_967_298, epoch: "e.00000002") == .duplicate)
    }

    @Test("M-1: only the most recent epochs are remembered")
    func boundedMemory() {
        var ids = UserMessageIDs(capacity: 2)
        #expect(ids.receive(5, epoch: "a") == .new)
        #expect(ids.receive(5, epoch: "b") == .newEpoch("b"))
        #expect(ids.receive(5, epoch: "c") == .newEpoch("c"))
        #expect(ids.receive(5, epoch: "a") == .newEpoch("a"))   // forgotten: counted afresh
    }
}
