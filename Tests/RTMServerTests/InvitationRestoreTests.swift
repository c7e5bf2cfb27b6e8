import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// Call invitations across a server restart as pure values (AGORA_REFERENCE §1.8): one
/// `HubState` writes its changes to a store, a second one (the restarted server) is built from
/// it, with other loop and wall-clock times. No sockets, no clock.
struct InvitationRestoreTests {
    private let alice = UserKey(appId: "app", userId: "alice")
    private let bob = UserKey(appId: "app", userId: "bob")
    private let key = InvitationTable.Key(appId: "app", id: "call-1")
    /// The first server's loop time at the invite, and the wall clock then (ms).
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let wallAtStart: Int64 = 1_700_000_000_000
    /// The restarted server's loop time at its start.
    private let restart = NIODeadline.uptimeNanoseconds(500_000_000_000)

    private static func state() -> HubState {
        var configuration = ServerConfiguration()
        configuration.heartbeatSlack = .seconds(10)
        return HubState(configuration: configuration)
    }

    private static func connection(_ id: UInt64) -> ConnectionRef {
        ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: 0)
    }

    /// Logs in (5 s heartbeat, 15 s presence timeout: a 30 s grace window), its `started`
    /// applied back as the single node's in-memory log does; returns the actions.
    @discardableResult
    private static func login(_ state: inout HubState, _ key: UserKey, _ connection: ConnectionRef, at now: NIODeadline) -> [HubAction] {
        let loop = EmbeddedEventLoop()
        let actions = state.onLogin(key: key, connection: connection, resumeToken: nil, heartbeat: .seconds(5), presenceTimeout: .seconds(15),
                                    now: now, wallMillis: 0, makePromise: { loop.makePromise() }).actions
        let applied = state.applyOwnClusterEvents(now: now, wallMillis: 0)
        for case .answerLogin(let promise) in applied { promise.succeed() }
        return actions + applied
    }

    /// Writes the store changes among `actions` as `Hub.run` does, `now` being wall time `wallMillis`.
    private static func persist(_ actions: [HubAction], to store: InMemoryInvitationStore, now: NIODeadline, wallMillis: Int64) {
        for case .storeInvitation(let change) in actions {
            if let record = change.record(now: now, wallMillis: wallMillis) {
                store.save(record)
            } else {
                store.delete(appId: change.key.appId, id: change.key.id, throughRevision: change.revision)
            }
        }
    }

    private static func frames(_ actions: [HubAction], to connection: ConnectionRef) -> [Frame] {
        actions.compactMap { if case .send(let frame, connection) = $0 { frame } else { nil } }
    }

    private static func timers(_ actions: [HubAction]) -> [(timer: HubTimer, at: NIODeadline)] {
        actions.compactMap { if case .schedule(let timer, let at, _) = $0 { (timer, at) } else { nil } }
    }

    private static func hasStoreChange(_ actions: [HubAction]) -> Bool {
        actions.contains { if case .storeInvitation = $0 { true } else { false } }
    }

    /// alice invites bob at `start`, bob's SDK acknowledges it a second later (and, with
    /// `acceptAfter`, accepts it then); every change stored. Returns the store.
    private func firstRun(acceptAfter: TimeAmount? = nil) throws -> InMemoryInvitationStore {
        let store = InMemoryInvitationStore()
        var state = Self.state()
        Self.login(&state, alice, Self.connection(1), at: start)
        Self.login(&state, bob, Self.connection(2), at: start)
        let invite = Frame(type: .invite, userId: "bob", text: "video?").with { $0.invitationId = key.id }
        let (reply, sent) = state.invitationRequest(invite, user: alice, now: start)
        #expect(try reply.get().event == LocalInvitationState.sentToRemote.name)
        Self.persist(sent, to: store, now: start, wallMillis: wallAtStart)
        let ackAt = start + .seconds(1)
        let ack = Frame(type: .ackInvitation).with { $0.invitationId = key.id }
        Self.persist(state.invitationRequest(ack, user: bob, now: ackAt).actions, to: store, now: ackAt, wallMillis: wallAtStart + 1_000)
        if let acceptAfter {
            let at = start + acceptAfter
            let accept = Frame(type: .acceptInvitation, text: "on my way").with { $0.invitationId = key.id }
            let (answer, actions) = state.invitationRequest(accept, user: bob, now: at)
            #expect(try answer.get().event == RemoteInvitationState.accepted.name)
            Self.persist(actions, to: store, now: at, wallMillis: wallAtStart + acceptAfter.nanoseconds / 1_000_000)
        }
        return store
    }

    @Test("§1.8: after a restart an open invitation's timers count from the first invite (expiry 60 s after it, not after the restart); the caller's window is its grace window")
    func timersFromFirstInvite() throws {
        let store = try firstRun()
        var state = Self.state()
        // The restart: 20 s of wall time after the invite.
        let actions = state.restoreInvitations(store.loadAll(), now: restart, wallMillis: wallAtStart + 20_000)
        let timers = Self.timers(actions)
        #expect(timers.contains { $0.timer == .invitation(key) && $0.at == restart + .seconds(40) })
        #expect(timers.contains { $0.timer == .invitationCaller(alice) && $0.at == restart + .seconds(30) })   // 5 + 10 + 15 s (P-1)
        #expect(state.invitations.invitations[key]?.machine.state == .received)

        // A restart after every timer: it fires at once (expire, told to both when they are back).
        var late = Self.state()
        let overdue = Self.timers(late.restoreInvitations(store.loadAll(), now: restart, wallMillis: wallAtStart + 600_000))
        #expect(overdue.contains { $0.timer == .invitation(key) && $0.at <= restart })
    }

    @Test("§1.8: after a restart the callee's catch-up acknowledgement is answered with the invitation; the caller's new login keeps it; its resend is answered with where it stands and changes nothing")
    func catchUpAfterRestart() throws {
        let store = try firstRun()
        var state = Self.state()
        _ = state.restoreInvitations(store.loadAll(), now: restart, wallMillis: wallAtStart + 20_000)
        let bobBack = Self.connection(3), aliceBack = Self.connection(4)
        // bob logs in again (resumed: false): it is delivered again; its acknowledgement works.
        let delivered = Self.frames(Self.login(&state, bob, bobBack, at: restart), to: bobBack)
        #expect(delivered.contains { $0.type == .remoteInvitation && $0.invitationId == key.id && $0.event == RemoteInvitationState.invitationReceived.name })
        let ack = Frame(type: .ackInvitation).with { $0.invitationId = key.id }
        let (ackReply, ackActions) = state.invitationRequest(ack, user: bob, now: restart)
        #expect(try ackReply.get().event == RemoteInvitationState.invitationReceived.name)
        #expect(!Self.hasStoreChange(ackActions))
        // alice logs in again: a new session, but the restart cut the old one: not canceled.
        let aliceLogin = Self.login(&state, alice, aliceBack, at: restart + .seconds(1))
        #expect(Self.frames(aliceLogin, to: bobBack).isEmpty)
        #expect(!Self.hasStoreChange(aliceLogin))
        let invite = Frame(type: .invite, userId: "bob", text: "video?").with { $0.invitationId = key.id }
        let (resend, resendActions) = state.invitationRequest(invite, user: alice, now: restart + .seconds(1))
        #expect(try resend.get().event == LocalInvitationState.receivedByRemote.name)
        #expect(resendActions.isEmpty)   // no timer restarts, nothing stored, nobody told
        // Its window ends: alice is back, nothing happens. Expiry at 60 s from the first invite.
        #expect(state.timerFired(.invitationCaller(alice), now: restart + .seconds(30), wallMillis: 0).isEmpty)
        let expired = state.timerFired(.invitation(key), now: restart + .seconds(40), wallMillis: 0)
        #expect(Self.frames(expired, to: aliceBack).map(\.code) == [LocalInvitationError.expire.rawValue])
        #expect(Self.hasStoreChange(expired))
    }

    @Test("§1.8: an invitation accepted before the restart does not ring again; a late resend gets its outcome within the forget window; past it, it is forgotten and deleted from the store")
    func answeredBeforeRestart() throws {
        let store = try firstRun(acceptAfter: .seconds(2))
        var state = Self.state()
        let actions = state.restoreInvitations(store.loadAll(), now: restart, wallMillis: wallAtStart + 30_000)
        // Forgotten 60 s after it ended (2 s after the invite): 32 s after the restart.
        #expect(Self.timers(actions).map(\.timer) == [.forgetInvitation(key)])
        #expect(Self.timers(actions).first?.at == restart + .seconds(32))
        let bobBack = Self.connection(3), aliceBack = Self.connection(4)
        #expect(Self.frames(Self.login(&state, bob, bobBack, at: restart), to: bobBack).isEmpty)   // no ring
        Self.login(&state, alice, aliceBack, at: restart)
        let invite = Frame(type: .invite, userId: "bob", text: "video?").with { $0.invitationId = key.id }
        let (resend, resendActions) = state.invitationRequest(invite, user: alice, now: restart)
        let view = try resend.get()
        #expect(view.event == LocalInvitationState.acceptedByRemote.name && view.text == "on my way")
        #expect(Self.frames(resendActions, to: bobBack).isEmpty)

        // A start after the forget window: nothing restored, the row deleted.
        var later = Self.state()
        let dropped = later.restoreInvitations(store.loadAll(), now: restart, wallMillis: wallAtStart + 62_001)
        #expect(later.invitations.invitations.isEmpty)
        Self.persist(dropped, to: store, now: restart, wallMillis: wallAtStart + 62_001)
        #expect(store.loadAll().isEmpty)
    }

    @Test("§1.8/P-2: a caller cut by the restart that does not log in within its grace window: its invitations are canceled, the callee told and the store updated")
    func callerWindowEnds() throws {
        let store = try firstRun()
        var state = Self.state()
        _ = state.restoreInvitations(store.loadAll(), now: restart, wallMillis: wallAtStart + 20_000)
        let bobBack = Self.connection(3)
        Self.login(&state, bob, bobBack, at: restart)
        #expect(state.timerFired(.invitationCaller(alice), now: restart + .seconds(29), wallMillis: 0).isEmpty)   // early
        let ended = state.timerFired(.invitationCaller(alice), now: restart + .seconds(30), wallMillis: 0)
        #expect(Self.frames(ended, to: bobBack).map(\.event) == [RemoteInvitationState.canceled.name])
        Self.persist(ended, to: store, now: restart + .seconds(30), wallMillis: wallAtStart + 50_000)
        #expect(store.loadAll().map(\.stage) == [.canceled])
        #expect(store.loadAll().first?.endedAtMillis == wallAtStart + 50_000)
    }

    @Test("§1.8: a live session's new login (another client, C-6) still cancels the invitations of the one it replaces")
    func newLoginStillCancels() throws {
        var state = Self.state()
        Self.login(&state, alice, Self.connection(1), at: start)
        let bobConnection = Self.connection(2)
        Self.login(&state, bob, bobConnection, at: start)
        let invite = Frame(type: .invite, userId: "bob").with { $0.invitationId = key.id }
        _ = state.invitationRequest(invite, user: alice, now: start)
        let replaced = Self.login(&state, alice, Self.connection(3), at: start + .seconds(1))
        #expect(Self.frames(replaced, to: bobConnection).contains { $0.event == RemoteInvitationState.canceled.name })
    }
}
