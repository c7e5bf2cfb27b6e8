import NIOCore
import RTMProtocol
import Testing
@testable import RTMServer

/// A call invitation's life as a pure value (AGORA_REFERENCE §1.8): no sockets, no clock.
struct InvitationStateMachineTests {
    typealias Machine = InvitationStateMachine
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let timing = Machine.Timing()

    @Test("§1.8: delivered to an online callee; its acknowledgement tells the caller receivedByRemote, once")
    func deliverAndAcknowledge() {
        var machine = Machine(now: Self.t0, timing: Self.timing, calleeOnline: true)
        #expect(machine.initialNotice.deliver)
        #expect(machine.callerView.state == .sentToRemote)
        #expect(machine.deadline == Self.t0 + .seconds(30))
        let ack = machine.acknowledged()
        #expect(ack.caller?.state == .receivedByRemote)
        #expect(ack.callee == nil)
        #expect(machine.deadline == Self.t0 + .seconds(60))
        #expect(machine.acknowledged() == Machine.Notice())   // a second acknowledgement: nothing
        #expect(machine.calleeView.state == .invitationReceived)
    }

    @Test("§1.8: an offline callee gets it when it comes online; still offline 30 s after sending → remoteOffline, the callee told nothing")
    func remoteOffline() {
        var machine = Machine(now: Self.t0, timing: Self.timing, calleeOnline: false)
        #expect(!machine.initialNotice.deliver)
        #expect(machine.timerFired(now: Self.t0 + .seconds(29)) == Machine.Notice())   // early: nothing
        let failed = machine.timerFired(now: Self.t0 + .seconds(30))
        #expect(failed.caller?.state == .failure)
        #expect(failed.caller?.code == LocalInvitationError.remoteOffline.rawValue)
        #expect(failed.callee == nil)
        #expect(machine.isFinal)
        #expect(machine.calleeOnline() == Machine.Notice())   // too late: not delivered

        var late = Machine(now: Self.t0, timing: Self.timing, calleeOnline: false)
        #expect(late.calleeOnline().deliver)
        #expect(late.deadline == Self.t0 + .seconds(30))
    }

    @Test("§1.8: delivered but never acknowledged within 30 s → remoteNoResponse; the callee sees localOffline")
    func noResponse() {
        var machine = Machine(now: Self.t0, timing: Self.timing, calleeOnline: true)
        let failed = machine.timerFired(now: Self.t0 + .seconds(30))
        #expect(failed.caller?.code == LocalInvitationError.remoteNoResponse.rawValue)
        #expect(failed.callee?.state == .failure)
        #expect(failed.callee?.code == RemoteInvitationError.localOffline.rawValue)
    }

    @Test("§1.8: acknowledged and left alone → expire at 60 s on both sides; a stale 30 s timer does nothing")
    func expiry() {
        var machine = Machine(now: Self.t0, timing: Self.timing, calleeOnline: true)
        _ = machine.acknowledged()
        #expect(machine.timerFired(now: Self.t0 + .seconds(30)) == Machine.Notice())
        let expired = machine.timerFired(now: Self.t0 + .seconds(60))
        #expect(expired.caller?.state == .failure)
        #expect(expired.caller?.code == LocalInvitationError.expire.rawValue)
        #expect(expired.callee?.code == RemoteInvitationError.expire.rawValue)
        #expect(machine.timerFired(now: Self.t0 + .seconds(90)) == Machine.Notice())
    }

    @Test("§1.8: accepted once: a second accept is alreadyAccept, a cancel after it too; the caller gets the response")
    func acceptedOnce() throws {
        var machine = Machine(now: Self.t0, timing: Self.timing, calleeOnline: true)
        _ = machine.acknowledged()
        let accepted = try machine.answer(accept: true, response: "yes").get()
        #expect(accepted.caller?.state == .acceptedByRemote)
        #expect(accepted.caller?.response == "yes")
        #expect(machine.calleeView.state == .accepted)
        #expect(throws: Machine.Refusal.self) { try machine.answer(accept: true, response: "again").get() }
        #expect(machine.cancel().failureCode == .invitationAlreadyAccept)
        #expect(machine.answer(accept: false, response: "no").failureCode == .invitationAlreadyAccept)
        #expect(machine.timerFired(now: Self.t0 + .seconds(60)) == Machine.Notice())
    }

    @Test("§1.8: cancel first: the callee is told, a late accept is alreadyEnd; cancel before delivery tells nobody")
    func cancelFirst() throws {
        var machine = Machine(now: Self.t0, timing: Self.timing, calleeOnline: true)
        let canceled = try machine.cancel().get()
        #expect(canceled.callee?.state == .canceled)
        #expect(canceled.caller == nil)
        #expect(machine.answer(accept: true, response: "").failureCode == .invitationAlreadyEnd)
        #expect(machine.cancel().failureCode == .invitationAlreadyEnd)

        var undelivered = Machine(now: Self.t0, timing: Self.timing, calleeOnline: false)
        #expect(try undelivered.cancel().get() == Machine.Notice())
    }

    @Test("§1.8: refused with a response; an accept without an acknowledgement first counts as both")
    func refuseAndDirectAccept() throws {
        var refused = Machine(now: Self.t0, timing: Self.timing, calleeOnline: true)
        let notice = try refused.answer(accept: false, response: "busy").get()
        #expect(notice.caller?.state == .refusedByRemote)
        #expect(notice.caller?.response == "busy")
        #expect(refused.calleeView.state == .refused)

        var direct = Machine(now: Self.t0, timing: Self.timing, calleeOnline: true)
        #expect(try direct.answer(accept: true, response: "").get().caller?.state == .acceptedByRemote)
    }
}

extension Result where Failure == InvitationStateMachine.Refusal {
    var failureCode: RTMErrorCode? { if case .failure(let refusal) = self { refusal.code } else { nil } }
}

/// The server's table of invitations as a pure value: resends, ownership, the open cap, a caller leaving.
struct InvitationTableTests {
    static let alice = UserKey(appId: "app", userId: "alice")
    static let bob = UserKey(appId: "app", userId: "bob")
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func invite(_ id: String, to callee: String = "bob") -> Frame {
        Frame(type: .invite, userId: callee, text: "hi").with { $0.invitationId = id }
    }

    @Test("§1.8: a resent invite changes nothing and answers where it stands; another caller's id is alreadySent")
    func resendAndOwnership() throws {
        var table = InvitationTable(timing: .init(), maxContentBytes: 100)
        let first = table.invite(Self.invite("i1"), caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0)
        #expect(first.sends.map(\.user) == [Self.bob])   // delivered
        #expect(first.timer?.deadline == Self.t0 + .seconds(30))
        _ = table.acknowledge("i1", callee: Self.bob, now: Self.t0)
        let again = table.invite(Self.invite("i1"), caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0 + .seconds(1))
        #expect(again.sends.isEmpty)
        #expect(try again.reply.get().event == "receivedByRemote")
        let stolen = table.invite(Self.invite("i1", to: "carol"), caller: Self.bob, calleeOnline: { _ in true }, now: Self.t0)
        #expect(stolen.reply.failureCode == .invitationAlreadySent)
        #expect(table.invite(Self.invite("i2", to: "alice"), caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0).reply.failureCode == .invitationInvalidArgument)
        #expect(table.cancel("i1", caller: Self.bob, now: Self.t0).reply.failureCode == .invitationNotStarted)
    }

    @Test("§1.8/§8: at most maxLivePerCaller open invitations; the caller leaving cancels them and tells the callees")
    func capAndCallerGone() {
        var table = InvitationTable(timing: .init(), maxContentBytes: 100)
        table.maxLivePerCaller = 2
        for id in ["a", "b"] { _ = table.invite(Self.invite(id), caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0) }
        #expect(table.invite(Self.invite("c"), caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0).reply.failureCode == .operationRateExceedLimitation)
        let gone = table.callerGone(Self.alice, now: Self.t0)
        #expect(gone.flatMap(\.sends).map { $0.frame.event } == ["canceled", "canceled"])
        #expect(gone.allSatisfy { $0.forgetAt != nil })
        #expect(table.invite(Self.invite("c"), caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0).reply.failureCode == nil)
    }

    @Test("§1.8: invite applies the name rules to the callee's id and the channel: -16101 naming the field")
    func inviteNameRules() {
        var table = InvitationTable(timing: .init(), maxContentBytes: 100)
        let badCallee = Frame(type: .invite, userId: "bad/id", text: "hi").with { $0.invitationId = "a" }
        let badChannel = Frame(type: .invite, userId: "bob", text: "hi").with { $0.invitationId = "b"; $0.channel = String(repeating: "c", count: 65) }
        let slash = Frame(type: .invite, userId: "bob", text: "hi").with { $0.invitationId = "c"; $0.channel = "bad/chan" }
        for frame in [badCallee, badChannel, slash] {
            let reply = table.invite(frame, caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0).reply
            #expect(reply.failureCode == .invitationInvalidArgument)
        }
        #expect("\(table.invite(badCallee, caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0).reply)".contains("callee's userId contains '/'"))
        #expect(table.invitations.isEmpty)
        let good = Frame(type: .invite, userId: "bob", text: "hi").with { $0.invitationId = "d"; $0.channel = "room-1" }
        #expect((try? table.invite(good, caller: Self.alice, calleeOnline: { _ in true }, now: Self.t0).reply.get()) != nil)
    }
}
