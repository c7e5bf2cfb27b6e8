import Foundation
import RTMContracts
@testable import RTMServer
import Testing

/// The invitation store seam's contract (`InvitationStoreContract`) on both single-node stores:
/// in memory, and SQLite on a file of its own.
@Suite("InvitationStore contract")
struct InvitationStoreContractTests {
    @Test("InMemoryInvitationStore", arguments: InvitationStoreContract.cases)
    func inMemory(_ rule: ContractCase<InvitationStoreSubject>) async throws {
        try await rule.run(on: InvitationStoreSubject(store: InMemoryInvitationStore()))
    }

    @Test("SQLiteInvitationStore", arguments: InvitationStoreContract.cases)
    func sqlite(_ rule: ContractCase<InvitationStoreSubject>) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-invitation-contract-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await rule.run(on: InvitationStoreSubject(store: SQLiteInvitationStore(path: directory + "/invitations.sqlite", fullSync: false)))
    }
}
