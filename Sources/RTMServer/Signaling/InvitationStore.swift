/// Where the server keeps its call invitations (AGORA_REFERENCE §1.8) so that they survive a
/// restart: open ones, and ended ones for their forget window (`invitationExpiry`), with their
/// outcome.
///
/// A single node uses `invitations.sqlite` in its data directory, or memory without one
/// (`ServerConfiguration.invitationStore` takes another implementation). A cluster keeps them
/// in its backplane's log instead (HubState+InvitationLog).
///
/// The server calls a store from one serial queue of its own (never an event loop, never under
/// its state lock), so calls may block and need not be reentrant.
public protocol InvitationStore: Sendable {
    /// Every invitation stored (read once, at start).
    func loadAll() throws -> [StoredInvitation]
    /// Stores `invitation` in place of the one with the same application and id, unless the
    /// stored one has a higher `revision` already.
    func save(_ invitation: StoredInvitation) throws
    /// Deletes invitation `id` of `appId` if its stored revision is at most `revision`.
    func delete(appId: String, id: String, throughRevision revision: UInt64) throws
}
