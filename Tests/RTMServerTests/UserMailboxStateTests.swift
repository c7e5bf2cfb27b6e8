import NIOCore
import NIOEmbedded
import Testing
@testable import RTMServer

/// The mailbox's rules as a value (SPEC M-1, M-3): one event in, the actions out; time passed in.
struct UserMailboxStateTests {
    private static let alice = UserKey(appId: "app", userId: "alice")
    private static let bob = UserKey(appId: "app", userId: "bob")
    private static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private static func machine(commitDelay: TimeAmount = .zero) -> UserMailboxState {
        UserMailboxState(configuration: .init(dedupCapacity: 16, commitDelay: commitDelay, deadline: .seconds(1), storeEpoch: "e"))
    }

    private static func connection(_ id: UInt64) -> ConnectionRef {
        ConnectionRef(id: id, channel: EmbeddedChannel(), loopIndex: 0)
    }

    private static func submission(_ text: String, msgId: UInt64? = nil) -> UserMailbox.Submission {
        let message = StoredUserMessage(appId: "app", receiver: "bob", sender: "alice", text: text, data: nil, customType: nil, ts: 0,
                                        clientMsgId: msgId)
        return UserMailbox.Submission(message: message, reply: .callback { _ in })
    }

    /// Messages for bob with these ids, as a read returns them.
    private static func stored(_ ids: [Int64]) -> [StoredUserMessage] {
        ids.map { StoredUserMessage(id: $0, appId: "app", receiver: "bob", sender: "alice", text: "m\($0)", data: nil, customType: nil, ts: 0) }
    }

    /// bob logged in on `connection`; the login's read found `waiting`.
    private static func online(_ machine: inout UserMailboxState, _ connection: ConnectionRef, waiting: [Int64] = []) {
        let login = machine.attach(bob, connection: connection, binary: true)
        _ = machine.readEnded(login.reads[0], .init(dropped: 0, messages: stored(waiting)))
    }

    /// alice sends `texts`, which start a commit, and the store begins it.
    private static func sendAndBegin(_ machine: inout UserMailboxState, _ texts: [String], msgId: UInt64? = nil) throws -> UserMailboxState.CommitRequest {
        let sent = machine.send(texts.map { submission($0, msgId: msgId) }, from: alice, now: t0)
        let commit = try #require(sent.commit)
        let began = machine.commitBegins(commit.id)
        #expect(began)
        return commit
    }

    /// The transaction `id` ended, and (as the owner does next, off the store's thread) what it
    /// asks to settle is settled: both events' actions together.
    private static func end(_ machine: inout UserMailboxState, _ id: UInt64, _ outcome: UserMailboxState.CommitOutcome,
                            now: NIODeadline) -> UserMailboxState.Actions {
        var actions = machine.commitEnded(id, outcome, now: now)
        guard actions.settle else { return actions }
        actions.settle = false
        actions.append(machine.settle())
        return actions
    }

    @Test("M-1: the end of a commit starts the next at once; its answers and deliveries come when it is settled, in commit order")
    func settledAfterTheNextCommitStarts() throws {
        var machine = Self.machine()
        let bobs = Self.connection(1)
        Self.online(&machine, bobs)
        let first = try Self.sendAndBegin(&machine, ["a"])
        _ = machine.send([Self.submission("b")], from: Self.alice, now: Self.t0)
        let ended = machine.commitEnded(first.id, .committed([CommittedUserMessage(id: 1)]), now: Self.t0)
        #expect(ended.settle)
        #expect(ended.answers.isEmpty && ended.deliveries.isEmpty)
        let second = try #require(ended.commit)
        #expect(second.messages.map(\.text) == ["b"])
        let began = machine.commitBegins(second.id)
        #expect(began)
        let secondEnded = machine.commitEnded(second.id, .committed([CommittedUserMessage(id: 2)]), now: Self.t0)
        #expect(secondEnded.settle && secondEnded.commit == nil)
        #expect(!machine.isIdle)   // two commits wait to be settled
        let settled = machine.settle()
        #expect(settled.answers.map(\.id) == [1, 2])
        #expect(settled.deliveries.map(\.message.id) == [1, 2])
        #expect(machine.isIdle)
        #expect(machine.settle().isEmpty)
    }

    @Test("M-1: a message that finds the store idle is committed at once, and answered with its id when the commit ends")
    func sendCommitsAndCommittedAnswers() throws {
        var machine = Self.machine()
        let actions = machine.send([Self.submission("hi")], from: Self.alice, now: Self.t0)
        let commit = try #require(actions.commit)
        #expect(commit.messages.map(\.text) == ["hi"])
        #expect(commit.due == Self.t0 + .seconds(1))
        #expect(actions.answers.isEmpty)
        #expect(actions.wake == Self.t0 + .seconds(1))   // the deadline
        let began = machine.commitBegins(commit.id)
        #expect(began)
        let ended = Self.end(&machine, commit.id, .committed([CommittedUserMessage(id: 7)]), now: Self.t0)
        #expect(ended.answers.map(\.id) == [7])
        #expect(ended.answers.first?.onlineHere == false)
        #expect(ended.deliveries.isEmpty)   // bob is not online: it waits in the store
        #expect(ended.commit == nil)
        #expect(machine.isIdle)
        #expect(machine.storedCount == 1)
    }

    @Test("M-1: what arrives while a commit runs goes into the next transaction, handed over as the first ends (group commit)")
    func groupCommit() throws {
        var machine = Self.machine()
        let first = try Self.sendAndBegin(&machine, ["1"])
        let second = machine.send([Self.submission("2"), Self.submission("3")], from: Self.alice, now: Self.t0)
        #expect(second.commit == nil)
        #expect(machine.waitingCount == 2)
        let ended = Self.end(&machine, first.id, .committed([CommittedUserMessage(id: 1)]), now: Self.t0)
        #expect(try #require(ended.commit).messages.map(\.text) == ["2", "3"])
        #expect(ended.answers.map(\.id) == [1])
    }

    @Test("M-1: committed → the sender's answer and the delivery to the receiver online here, in store order")
    func committedDelivers() throws {
        var machine = Self.machine()
        let bobs = Self.connection(1)
        Self.online(&machine, bobs)
        let commit = try Self.sendAndBegin(&machine, ["a", "b"])
        let ended = Self.end(&machine, commit.id, .committed([CommittedUserMessage(id: 4), CommittedUserMessage(id: 5)]), now: Self.t0)
        #expect(ended.answers.map(\.onlineHere) == [true, true])
        #expect(ended.deliveries.map(\.message.id) == [4, 5])
        #expect(ended.deliveries.allSatisfy { $0.connection === bobs && $0.binary })
    }

    @Test("M-1, M-3: the deadline passes while the commit runs → refused with the outcome unknown; its late end answers nobody again but still delivers")
    func deadlineWhileRunning() throws {
        var machine = Self.machine()
        Self.online(&machine, Self.connection(1))
        _ = machine.attach(Self.alice, connection: Self.connection(2), binary: true)   // senders online here are remembered
        let commit = try Self.sendAndBegin(&machine, ["x"], msgId: 9)
        let woke = machine.wake(now: Self.t0 + .seconds(1))
        #expect(woke.refusals.count == 1)
        #expect(woke.refusals.first?.reason.contains("the outcome is unknown") == true)
        #expect(woke.refusals.first?.reason.contains("resend with the same msgId") == true)
        let ended = Self.end(&machine, commit.id, .committed([CommittedUserMessage(id: 3)]), now: Self.t0 + .seconds(2))
        #expect(ended.answers.isEmpty && ended.refusals.isEmpty)
        #expect(ended.deliveries.map(\.message.id) == [3])
        // M-3: the resend with the same msgId is recognised (here from memory; the store too).
        let resend = machine.send([Self.submission("x", msgId: 9)], from: Self.alice, now: Self.t0 + .seconds(3))
        #expect(resend.answers.map(\.id) == [3])
        #expect(resend.commit == nil)
    }

    @Test("M-1: the deadline passes before the commit began → refused, nothing stored; it never begins, and its acknowledgements go into the next")
    func deadlineBeforeBegun() throws {
        var machine = Self.machine()
        let bobs = Self.connection(1)
        Self.online(&machine, bobs, waiting: [2])
        let first = try Self.sendAndBegin(&machine, ["p"])
        _ = machine.acknowledge(Self.bob, upTo: 2, on: bobs, now: Self.t0)
        _ = machine.send([Self.submission("q")], from: Self.alice, now: Self.t0 + .milliseconds(100))
        let second = try #require(Self.end(&machine, first.id, .committed([CommittedUserMessage(id: 3)]), now: Self.t0).commit)
        #expect(second.messages.map(\.text) == ["q"] && second.acknowledgements.map(\.upTo) == [2])
        let woke = machine.wake(now: Self.t0 + .milliseconds(1_100))   // q's deadline: its commit has not begun
        #expect(woke.refusals.count == 1)
        #expect(woke.refusals.first?.reason.contains("nothing was stored") == true)
        let began = machine.commitBegins(second.id)
        #expect(!began)
        let ended = Self.end(&machine, second.id, .notBegun, now: Self.t0 + .milliseconds(1_100))
        #expect(ended.answers.isEmpty && ended.refusals.isEmpty)
        let third = try #require(ended.commit)
        #expect(third.messages.isEmpty && third.acknowledgements.map(\.upTo) == [2])
    }

    @Test("M-1: a message waiting behind a commit that runs past its deadline is refused unsent at its own deadline")
    func waitingMessageExpires() throws {
        var machine = Self.machine()
        _ = try Self.sendAndBegin(&machine, ["1"])
        let second = machine.send([Self.submission("2")], from: Self.alice, now: Self.t0 + .milliseconds(500))
        #expect(second.commit == nil)
        _ = machine.wake(now: Self.t0 + .seconds(1))   // the first: outcome unknown
        let woke = machine.wake(now: Self.t0 + .milliseconds(1_500))
        #expect(woke.refusals.count == 1)
        #expect(woke.refusals.first?.reason.contains("nothing was stored") == true)
        #expect(machine.waitingCount == 0)
    }

    @Test("M-1: a login while a commit is in flight: the committed message is held, then follows the waiting ones once, in store order")
    func attachWhileCommitInFlight() throws {
        var machine = Self.machine()
        let commit = try Self.sendAndBegin(&machine, ["live"])
        let login = machine.attach(Self.bob, connection: Self.connection(1), binary: true)
        #expect(login.reads.map(\.login) == [true])
        let ended = Self.end(&machine, commit.id, .committed([CommittedUserMessage(id: 6)]), now: Self.t0)
        #expect(ended.deliveries.isEmpty)   // held behind the read
        #expect(ended.answers.first?.onlineHere == true)
        let read = machine.readEnded(login.reads[0], .init(dropped: 0, messages: Self.stored([5, 6])))
        #expect(read.deliveries.map(\.message.id) == [5, 6])   // 6 read and held: sent once
    }

    @Test("M-1: a login right after an ack, before the commit that deletes what it acknowledged: a read that still finds those messages does not deliver them again")
    func loginBeforeAckCommitted() throws {
        var machine = Self.machine()
        let first = Self.connection(1)
        Self.online(&machine, first, waiting: [1, 2])
        let acked = machine.acknowledge(Self.bob, upTo: 2, on: first, now: Self.t0)
        let deleting = try #require(acked.commit)
        #expect(deleting.acknowledgements.map(\.upTo) == [2])
        machine.detach(Self.bob, connection: first)
        let login = machine.attach(Self.bob, connection: Self.connection(2), binary: true)
        // The read ran before the deleting commit: it still finds 1 and 2, and 3 came meanwhile.
        let read = machine.readEnded(login.reads[0], .init(dropped: 0, messages: Self.stored([1, 2, 3])))
        #expect(read.deliveries.map(\.message.id) == [3])
        #expect(read.dropped.isEmpty)
    }

    @Test("M-1: an ack counts up to the highest id written to its connection, and one from another connection counts for nothing")
    func ackBoundedByWhatWasWritten() throws {
        var machine = Self.machine()
        let bobs = Self.connection(1), stranger = Self.connection(2)
        let login = machine.attach(Self.bob, connection: bobs, binary: true)
        let early = machine.acknowledge(Self.bob, upTo: 100, on: bobs, now: Self.t0)
        #expect(early.commit == nil)   // nothing written yet
        _ = machine.readEnded(login.reads[0], .init(dropped: 0, messages: Self.stored([3])))
        let foreign = machine.acknowledge(Self.bob, upTo: 100, on: stranger, now: Self.t0)
        #expect(foreign.commit == nil)
        let acked = machine.acknowledge(Self.bob, upTo: 100, on: bobs, now: Self.t0)
        let commit = try #require(acked.commit)
        #expect(commit.messages.isEmpty)
        #expect(commit.acknowledgements.map(\.upTo) == [3])
    }

    @Test("M-1: messages dropped by the cap or the age are reported at the login, before the waiting ones")
    func droppedReportedAtLogin() {
        var machine = Self.machine()
        let bobs = Self.connection(1)
        let login = machine.attach(Self.bob, connection: bobs, binary: true)
        let read = machine.readEnded(login.reads[0], .init(dropped: 4, messages: Self.stored([8])))
        #expect(read.dropped.map(\.count) == [4])
        #expect(read.dropped.first?.whileOnline == false)
        #expect(read.dropped.first?.connection === bobs)
        #expect(read.deliveries.map(\.message.id) == [8])
    }

    @Test("M-1: cluster: a committed id that does not follow what the connection has is read again; ids the read skips are reported as dropped")
    func clusterGapRereads() throws {
        var machine = Self.machine()
        Self.online(&machine, Self.connection(1))
        let commit = try Self.sendAndBegin(&machine, ["a"])
        // Another node stored 1 and 2; this commit got 3 (its predecessor, 2, is not here).
        let ended = Self.end(&machine, commit.id, .committed([CommittedUserMessage(id: 3, previous: 2)]), now: Self.t0)
        #expect(ended.deliveries.isEmpty)
        let reread = try #require(ended.reads.first)
        #expect(!reread.login)
        // Another wake-up meanwhile: read once more after this read.
        let meanwhile = machine.othersCommitted([Self.bob])
        #expect(meanwhile.reads.isEmpty)
        let read = machine.readEnded(reread, .init(dropped: 0, messages: Self.stored([1, 3])))
        #expect(read.deliveries.map(\.message.id) == [1, 3])
        #expect(read.reads.count == 1)   // the one asked for meanwhile
        // 4 was dropped before this node could read it: reported while online, before 5.
        let again = machine.readEnded(read.reads[0], .init(dropped: 0, messages: Self.stored([5])))
        #expect(again.dropped.map(\.count) == [1])
        #expect(again.dropped.first?.whileOnline == true)
        #expect(again.deliveries.map(\.message.id) == [5])
        // The next id follows at once.
        let next = try Self.sendAndBegin(&machine, ["b"])
        let live = Self.end(&machine, next.id, .committed([CommittedUserMessage(id: 6, previous: 5)]), now: Self.t0)
        #expect(live.deliveries.map(\.message.id) == [6])
    }

    @Test("M-1: a poll of other nodes asks for the newest ids of the receivers online here; one with more than its connection has is read again")
    func pollReadsNewer() {
        var machine = Self.machine()
        Self.online(&machine, Self.connection(1))
        let poll = machine.othersCommitted(nil)
        #expect(poll.newest == [Self.bob])
        let same = machine.newestFound([Self.bob: 0])
        #expect(same.reads.isEmpty)
        let newer = machine.newestFound([Self.bob: 2])
        #expect(newer.reads.count == 1)
    }

    @Test("M-1: with a commit delay, a message that finds the store idle waits for company until a wake-up")
    func commitDelay() throws {
        var machine = Self.machine(commitDelay: .milliseconds(5))
        let first = machine.send([Self.submission("1")], from: Self.alice, now: Self.t0)
        #expect(first.commit == nil)
        #expect(first.wake == Self.t0 + .milliseconds(5))
        let second = machine.send([Self.submission("2")], from: Self.alice, now: Self.t0 + .milliseconds(1))
        #expect(second.commit == nil)
        let woke = machine.wake(now: Self.t0 + .milliseconds(5))
        #expect(try #require(woke.commit).messages.count == 2)
    }

    @Test("M-3: a resend of a message remembered here is answered with the first id and not stored again; a detached sender is forgotten")
    func resendFromMemory() throws {
        var machine = Self.machine()
        let alices = Self.connection(3)
        _ = machine.attach(Self.alice, connection: alices, binary: true)
        let commit = try Self.sendAndBegin(&machine, ["x"], msgId: 1)
        _ = Self.end(&machine, commit.id, .committed([CommittedUserMessage(id: 11)]), now: Self.t0)
        let resend = machine.send([Self.submission("x", msgId: 1)], from: Self.alice, now: Self.t0)
        #expect(resend.answers.map(\.id) == [11] && resend.commit == nil)
        #expect(machine.rememberedSenders == 1)
        machine.detach(Self.alice, connection: alices)
        #expect(machine.rememberedSenders == 0)
    }
}
