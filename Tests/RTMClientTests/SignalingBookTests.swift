import Testing
@testable import RTMClient
import RTMProtocol

/// The SDK's records of watched peers and call invitations, as pure values (§1.7, §1.8): what
/// they report, and that nothing is reported twice or rolled back.
struct SignalingBookTests {
    static func status(_ user: String, _ state: PeerOnlineState) -> PeerOnlineStatus { PeerOnlineStatus(userId: user, state: state) }

    @Test("§1.7: the first subscribe announces everyone; then only changes; an older version never rolls a state back")
    func peerWatchList() {
        var list = PeerWatchList()
        list.peers = ["bob", "carol"]
        let first = list.apply([Self.status("bob", .online), Self.status("carol", .offline)], version: 5, announce: ["bob", "carol"])
        #expect(first == [Self.status("bob", .online), Self.status("carol", .offline)])
        #expect(list.apply([Self.status("bob", .online)], version: 6).isEmpty)   // no change
        #expect(list.apply([Self.status("bob", .unreachable)], version: 8) == [Self.status("bob", .unreachable)])
        #expect(list.apply([Self.status("bob", .online)], version: 7).isEmpty)   // overtaken: stale
        #expect(list.apply([Self.status("dave", .online)], version: 9).isEmpty)   // not watched
        list.remove(["bob"])
        #expect(list.apply([Self.status("bob", .offline)], version: 10).isEmpty)
        // After a reconnection versions start over and only differences are reported.
        list.versions = [:]
        #expect(list.apply([Self.status("carol", .online)], version: 1) == [Self.status("carol", .online)])
    }

    @Test("§1.8: invitation states only move forward; duplicates and late frames report nothing")
    func invitationBook() {
        var book = InvitationBook()
        book.local["i1"] = LocalInvitation(id: "i1", calleeId: "bob", content: "", channelId: nil, state: .sentToRemote)
        func local(_ event: String, text: String? = nil, code: Int? = nil) -> Frame {
            Frame(type: .localInvitation, userId: "bob", text: text, event: event, code: code).with { $0.invitationId = "i1" }
        }
        #expect(book.applyLocal(local("receivedByRemote"))?.state == .receivedByRemote)
        #expect(book.applyLocal(local("receivedByRemote")) == nil)
        #expect(book.applyLocal(local("acceptedByRemote", text: "yes"))?.response == "yes")
        #expect(book.applyLocal(local("canceled")) == nil)   // final: never left
        #expect(book.applyLocal(local("bogus")) == nil)

        func remote(_ event: String, code: Int? = nil) -> Frame {
            Frame(type: .remoteInvitation, userId: "alice", text: "hi", event: event, code: code).with { $0.invitationId = "r1" }
        }
        #expect(book.applyRemote(remote("canceled")) == nil)   // the end of one never received
        #expect(book.applyRemote(remote("invitationReceived"))?.content == "hi")
        #expect(book.applyRemote(remote("invitationReceived")) == nil)   // delivered again after a reconnection
        let failed = book.applyRemote(remote("failure", code: 3))
        #expect(failed?.state == .failure)
        #expect(failed?.error == .expire)
        #expect(book.applyRemote(remote("accepted")) == nil)
    }
}
