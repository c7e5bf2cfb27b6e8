import RTMContracts
import RTMPostgres
import RTMServer
import RTMTestSupport
import Testing

/// The user-message seam's contract (`UserMessageStoreContract`, and what a shared store adds)
/// on the cluster's store: `PostgresUserMessageStore` on a real PostgreSQL. Serialized: a store
/// drops every application's records of used msgIds older than the window it is given, and a
/// case lets the window pass by giving one in the future.
@Suite("UserMessageStore contract: PostgresUserMessageStore", .realTime, .serialized, .contractDatabase,
       .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresUserMessageStoreContractTests {
    @Test(arguments: UserMessageStoreContract.cases + UserMessageStoreContract.sharedCases)
    func contract(_ rule: ContractCase<UserMessageStoreSubject>) async throws {
        try await ContractDatabase.withCase(open: { database, name in
            try await PostgresUserMessageStore.open(location: database.location, node: name, logger: ContractDatabase.logger)
        }, stop: { await $0.stop() }) { store, _, name in
            try await rule.run(on: UserMessageStoreSubject(store: store, appId: name))
        }
    }
}
