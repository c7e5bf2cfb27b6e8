import NIOConcurrencyHelpers

/// Invitations kept in memory: they last as long as the process (a server without a data
/// directory; a cluster node, whose invitations are per node).
final class InMemoryInvitationStore: InvitationStore {
    private struct Key: Hashable {
        let appId: String
        let id: String
    }

    private let invitations = NIOLockedValueBox<[Key: StoredInvitation]>([:])

    func loadAll() -> [StoredInvitation] {
        invitations.withLockedValue { Array($0.values) }.sorted { ($0.appId, $0.id) < ($1.appId, $1.id) }
    }

    func save(_ invitation: StoredInvitation) {
        let key = Key(appId: invitation.appId, id: invitation.id)
        invitations.withLockedValue { stored in
            if let current = stored[key], current.revision > invitation.revision { return }
            stored[key] = invitation
        }
    }

    func delete(appId: String, id: String, throughRevision revision: UInt64) {
        let key = Key(appId: appId, id: id)
        invitations.withLockedValue { stored in
            if let current = stored[key], current.revision <= revision { stored[key] = nil }
        }
    }
}
