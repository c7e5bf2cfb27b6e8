import RTMContracts
import RTMServer
import Testing

/// The user-message seam's contract (`UserMessageStoreContract`) on one node's store:
/// `SQLiteUserMessageStore` in memory. The cluster's store runs the same cases in
/// RTMPostgresTests.
@Suite("UserMessageStore contract: SQLiteUserMessageStore")
struct SQLiteUserMessageStoreContractTests {
    @Test(arguments: UserMessageStoreContract.cases)
    func contract(_ rule: ContractCase<UserMessageStoreSubject>) async throws {
        try await rule.run(on: UserMessageStoreSubject(store: try SQLiteUserMessageStore(path: nil), appId: "app"))
    }
}
