import Logging

/// Hands the hub's invitation changes to the `InvitationStore` on a serial queue of its own, in
/// the order they are given: never on an event loop, never under the hub's lock (`Hub.run`
/// performs `HubAction.storeInvitation` after the lock). Changes decided under the lock by two
/// threads may arrive here in either order; the store keeps the higher revision. A write that
/// fails is logged: the invitation goes on in memory, only a restart would lose it.
final class InvitationWriter: Sendable {
    private let store: any InvitationStore
    private let queue = CountedQueue(label: "rtm.invitations")
    private let logger: Logger

    init(store: any InvitationStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Every stored invitation (at start, before the server accepts connections).
    func loadAll() throws -> [StoredInvitation] {
        try queue.sync { try store.loadAll() }
    }

    /// Saves an invitation's new state, after the writes given before.
    func save(_ invitation: StoredInvitation) {
        queue.async { [store, logger] in
            do { try store.save(invitation) } catch {
                logger.error("an invitation could not be stored; a restart would lose its change",
                             metadata: ["invitation": "\(invitation.id)", "error": "\(error)"])
            }
        }
    }

    /// Deletes a forgotten invitation, after the writes given before.
    func delete(appId: String, id: String, throughRevision revision: UInt64) {
        queue.async { [store, logger] in
            do { try store.delete(appId: appId, id: id, throughRevision: revision) } catch {
                logger.warning("a forgotten invitation could not be deleted; the next start drops it",
                               metadata: ["invitation": "\(id)", "error": "\(error)"])
            }
        }
    }

    /// Runs `body` on the queue once every write given before has been made.
    func afterWrites(_ body: @escaping @Sendable () -> Void) {
        queue.async(body)
    }

    /// Waits for every write given so far (shutdown, tests).
    func drain() async {
        await queue.drain()
    }
}
