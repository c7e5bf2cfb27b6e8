import RTMContracts
@testable import RTMServer
import Testing

/// The lock seam's contract (`LockStoreContract`) on one node's store: `MemoryLockStore` on a
/// manual clock. The cluster's store runs the same cases in RTMPostgresTests.
@Suite("SharedLockStore contract: MemoryLockStore")
struct MemoryLockStoreContractTests {
    @Test(arguments: LockStoreContract.cases)
    func contract(_ rule: ContractCase<LockStoreSubject>) async throws {
        let clock = ManualClock()
        let store = MemoryLockStore(now: { clock.now })
        try await rule.run(on: LockStoreSubject(store: store, appId: "app") { clock.advance(seconds: $0) })
    }
}
