import Foundation
import Testing
@testable import RTMServer

/// The SQLite invitation store keeps its rows when its file is opened again (§1.8). The rules
/// both invitation stores keep are their contract (`InvitationStoreContractTests`).
struct InvitationStoreTests {
    private static func record(_ stage: StoredInvitation.Stage, revision: UInt64) -> StoredInvitation {
        StoredInvitation(appId: "app", id: "call-1", caller: "alice", callee: "bob", content: "video?", channel: "call-42",
                         sentAtMillis: 1_000, stage: stage, response: stage == .accepted ? "on my way" : nil,
                         endedAtMillis: stage == .accepted ? 2_000 : nil, callerWindowMillis: 30_000, revision: revision)
    }

    @Test("§1.8: the SQLite store keeps every field and its rows when the file is opened again")
    func sqliteReopened() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-invitation-store-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/invitations.sqlite"
        try SQLiteInvitationStore(path: path, fullSync: false).save(Self.record(.accepted, revision: 7))
        #expect(try SQLiteInvitationStore(path: path, fullSync: false).loadAll() == [Self.record(.accepted, revision: 7)])
    }
}
