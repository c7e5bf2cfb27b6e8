import Foundation
import Testing
@testable import RTMServer

/// The invitation stores (§1.8): a change never goes back to a lower revision (writes decided
/// under the hub's lock by two threads may arrive in either order), a deletion removes only
/// what it has seen, and the SQLite file keeps its rows when reopened.
struct InvitationStoreTests {
    private static func record(_ stage: StoredInvitation.Stage, revision: UInt64) -> StoredInvitation {
        StoredInvitation(appId: "app", id: "call-1", caller: "alice", callee: "bob", content: "video?", channel: "call-42",
                         sentAtMillis: 1_000, stage: stage, response: stage == .accepted ? "on my way" : nil,
                         endedAtMillis: stage == .accepted ? 2_000 : nil, callerWindowMillis: 30_000, revision: revision)
    }

    private static func checkRevisions(_ store: any InvitationStore) throws {
        try store.save(record(.received, revision: 2))
        try store.save(record(.delivered, revision: 1))   // late: ignored
        #expect(try store.loadAll() == [record(.received, revision: 2)])
        try store.save(record(.accepted, revision: 3))
        #expect(try store.loadAll() == [record(.accepted, revision: 3)])
        try store.delete(appId: "app", id: "call-1", throughRevision: 2)   // older than the row: kept
        #expect(try store.loadAll().count == 1)
        try store.delete(appId: "app", id: "call-1", throughRevision: 4)
        #expect(try store.loadAll().isEmpty)
    }

    @Test("§1.8: the in-memory store keeps the highest revision; a deletion removes only revisions it has seen")
    func inMemory() throws {
        try Self.checkRevisions(InMemoryInvitationStore())
    }

    @Test("§1.8: the SQLite store keeps the highest revision, every field, and its rows when the file is opened again")
    func sqlite() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-invitation-store-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/invitations.sqlite"
        try Self.checkRevisions(SQLiteInvitationStore(path: path, fullSync: false))
        try SQLiteInvitationStore(path: path, fullSync: false).save(Self.record(.accepted, revision: 7))
        #expect(try SQLiteInvitationStore(path: path, fullSync: false).loadAll() == [Self.record(.accepted, revision: 7)])
    }
}
