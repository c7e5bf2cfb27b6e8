import RTMServer
import Testing

/// An invitation store under test (`InvitationStore`, AGORA_REFERENCE §1.8).
public struct InvitationStoreSubject: Sendable {
    public let store: any InvitationStore

    /// A subject over `store`.
    public init(store: any InvitationStore) {
        self.store = store
    }
}

/// An invitation record at `stage` (with the fields that stage carries).
func invitation(_ stage: StoredInvitation.Stage, id: String = "call-1", app: String = "app", revision: UInt64) -> StoredInvitation {
    let ended = [.accepted, .refused, .canceled, .failed].contains(stage)
    return StoredInvitation(appId: app, id: id, caller: "alice", callee: "bob", content: "video?", channel: stage == .pending ? nil : "call-42",
                            sentAtMillis: 1_000, stage: stage, failure: stage == .failed ? 2 : nil,
                            response: stage == .accepted || stage == .refused ? "on my way" : nil,
                            endedAtMillis: ended ? 2_000 : nil, callerWindowMillis: 30_000, revision: revision)
}

/// The rules every `InvitationStore` keeps (§1.8), the in-memory one and the SQLite one alike.
///
/// A cluster keeps no invitation store: its invitations are the events of the backplane's
/// invitation channel, applied by every node to the same `InvitationTable` a single node uses
/// (`HubState+InvitationLog`); what the two modes share is that table's rules, not a store.
public enum InvitationStoreContract {
    /// Every rule.
    public static let cases: [ContractCase<InvitationStoreSubject>] = [
        .init("§1.8: an invitation at every stage (sent, delivered, received, accepted, refused, canceled, failed) reads back with every field") { s async throws in
            for (index, stage) in StoredInvitation.Stage.allCases.enumerated() {
                try s.store.save(invitation(stage, id: "call-\(index)", revision: UInt64(index + 1)))
            }
            #expect(try s.store.loadAll() == StoredInvitation.Stage.allCases.enumerated().map { invitation($1, id: "call-\($0)", revision: UInt64($0 + 1)) })
        },
        .init("§1.8: loadAll lists every application's invitations, sorted by application then id") { s async throws in
            for (app, id) in [("b", "1"), ("a", "2"), ("a", "10"), ("b", "0")] { try s.store.save(invitation(.pending, id: id, app: app, revision: 1)) }
            #expect(try s.store.loadAll().map { "\($0.appId)/\($0.id)" } == ["a/10", "a/2", "b/0", "b/1"])
        },
        .init("§1.8: a change replaces the stored one at the same or a higher revision; a late one (lower revision) is ignored") { s async throws in
            try s.store.save(invitation(.received, revision: 2))
            try s.store.save(invitation(.delivered, revision: 1))
            #expect(try s.store.loadAll() == [invitation(.received, revision: 2)])
            try s.store.save(invitation(.accepted, revision: 2))
            #expect(try s.store.loadAll() == [invitation(.accepted, revision: 2)])
            try s.store.save(invitation(.refused, revision: 3))
            #expect(try s.store.loadAll() == [invitation(.refused, revision: 3)])
        },
        .init("§1.8: a deletion removes only a revision it has seen; another application's invitation with the same id stays") { s async throws in
            try s.store.save(invitation(.canceled, revision: 3))
            try s.store.save(invitation(.pending, app: "other", revision: 1))
            try s.store.delete(appId: "app", id: "call-1", throughRevision: 2)
            #expect(try s.store.loadAll().count == 2)
            try s.store.delete(appId: "app", id: "call-1", throughRevision: 3)
            try s.store.delete(appId: "app", id: "never", throughRevision: 9)
            #expect(try s.store.loadAll() == [invitation(.pending, app: "other", revision: 1)])
        },
    ]
}
