import RTMContracts
import RTMPostgres
import RTMTestSupport
import Testing

/// The lock seam's contract (`LockStoreContract`) on the cluster's store: `PostgresServices`
/// on a real PostgreSQL. Time passes by moving the case's due times back. Serialized: a sweep
/// releases every application's due locks, another case's too.
@Suite("SharedLockStore contract: PostgresServices", .realTime, .serialized, .contractDatabase,
       .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresLockStoreContractTests {
    @Test(arguments: LockStoreContract.cases)
    func contract(_ rule: ContractCase<LockStoreSubject>) async throws {
        try await ContractDatabase.withCase(open: ContractDatabase.services, stop: { await $0.stop() }) { services, database, name in
            try await rule.run(on: LockStoreSubject(store: services, appId: name) { seconds in
                try await database.execute(
                    "UPDATE rtm_lock SET due_at = due_at - interval '\(seconds) seconds' WHERE app = '\(name)' AND due_at IS NOT NULL")
            })
        }
    }
}
