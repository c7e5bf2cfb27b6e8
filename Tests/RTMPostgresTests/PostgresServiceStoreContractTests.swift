import RTMContracts
import RTMPostgres
import RTMTestSupport
import Testing

/// The metadata and history seam's contract (`ServiceStoreContract`) on the cluster's store:
/// `PostgresServices` (its own lock store) on a real PostgreSQL.
@Suite("SharedServiceStore contract: PostgresServices", .realTime, .contractDatabase,
       .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresServiceStoreContractTests {
    @Test(arguments: ServiceStoreContract.cases)
    func contract(_ rule: ContractCase<ServiceStoreSubject>) async throws {
        try await ContractDatabase.withCase(open: ContractDatabase.services, stop: { await $0.stop() }) { services, _, name in
            try await rule.run(on: ServiceStoreSubject(store: services, locks: services, appId: name))
        }
    }
}
