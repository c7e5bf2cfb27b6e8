import RTMContracts
@testable import RTMServer
import Testing

/// The metadata and history seam's contract (`ServiceStoreContract`) on one node's store:
/// `LocalServiceStore` over SQLite in memory, its lock guards answered by a `MemoryLockStore`,
/// as the server composes them. The cluster's store runs the same cases in RTMPostgresTests.
@Suite("SharedServiceStore contract: LocalServiceStore over SQLite")
struct LocalServiceStoreContractTests {
    @Test(arguments: ServiceStoreContract.cases)
    func contract(_ rule: ContractCase<ServiceStoreSubject>) async throws {
        let locks = MemoryLockStore()
        let store = LocalServiceStore(try SQLiteServiceStore(path: nil, fullSync: false)) { required, key in
            locks.holds(required.owner, lock: required.lockName, appId: key.appId, channel: key.target)
        }
        try await rule.run(on: ServiceStoreSubject(store: store, locks: locks, appId: "app"))
    }
}
