import Testing
@testable import RTMServer

/// A cluster receiver's node counts the messages a complete read skips (SPEC M-1: dropped by the
/// cap or the age before the node could read them; reported to the online receiver at once).
struct UserMailboxSkippedTests {
    private static func message(_ id: Int64, _ epoch: String? = nil) -> StoredUserMessage {
        StoredUserMessage(id: id, appId: "app", receiver: "bob", sender: "alice", text: "m\(id)", data: nil, customType: nil, ts: 0, epoch: epoch)
    }

    private static let next = Int64(1) << 32   // the first id of the next timeline's epoch

    @Test("M-1: ids dense within an epoch: only a jump within one epoch counts, never the first read of a login or a new epoch's jump")
    func skippedCounts() {
        let e = "store"
        #expect(UserMailboxState.skipped([Self.message(3), Self.message(4)], after: 0, epoch: nil, storeEpoch: e) == 0)
        #expect(UserMailboxState.skipped([Self.message(6), Self.message(7)], after: 5, epoch: e, storeEpoch: e) == 0)
        #expect(UserMailboxState.skipped([Self.message(9), Self.message(10)], after: 5, epoch: e, storeEpoch: e) == 3)
        #expect(UserMailboxState.skipped([Self.message(6), Self.message(9)], after: 5, epoch: e, storeEpoch: e) == 2)
        #expect(UserMailboxState.skipped([Self.message(Self.next + 1, "store.2")], after: 5, epoch: e, storeEpoch: e) == 0)
        #expect(UserMailboxState.skipped([Self.message(8), Self.message(Self.next + 1, "store.2"), Self.message(Self.next + 3, "store.2")],
                                    after: 5, epoch: e, storeEpoch: e) == 3)
        #expect(UserMailboxState.skipped([], after: 5, epoch: e, storeEpoch: e) == 0)
    }
}
