import NIOCore
import RTMProtocol
import Testing
@testable import RTMClient

/// Several endpoints: a shuffled order, the next one per attempt; and the
/// link machine's answer to `goaway`.
struct EndpointRotationTests {
    static let endpoints = (1...4).map { ClientTransport.Endpoint("ws://node\($0):9600")! }

    @Test("The first attempt takes the first of a seeded shuffle, each later attempt the next, round the list")
    func rotation() {
        var rotation = EndpointRotation(Self.endpoints, seed: 7)
        #expect(Set(rotation.order.map(\.host)) == Set(Self.endpoints.map(\.host)))
        let visited = (0..<8).map { _ in rotation.nextAttempt().host }
        #expect(Array(visited[0..<4]) == rotation.order.map(\.host))
        #expect(Array(visited[4..<8]) == rotation.order.map(\.host))
        #expect(rotation.current.host == visited[7])
        // The same seed, the same order; the orders over seeds are not all the same (a fleet spreads).
        #expect(EndpointRotation(Self.endpoints, seed: 7).order == rotation.order)
        let firsts = Set((0..<32).map { EndpointRotation(Self.endpoints, seed: UInt64($0)).order[0].host })
        #expect(firsts.count > 1)
    }

    @Test("One endpoint: every attempt goes there")
    func single() {
        var rotation = EndpointRotation([Self.endpoints[0]], seed: 1)
        for _ in 0..<3 { #expect(rotation.nextAttempt() == Self.endpoints[0]) }
    }

    @Test("Goaway on a connected link → disconnected (reason serverGoingAway, op serverReject), retry within the server's spread")
    func goAwayOnConnected() {
        var machine = LinkStateMachineTests.connected()
        let now = LinkStateMachineTests.t(10)
        let actions = machine.goAway(attempt: 1, spread: 0.5, message: "server going away: server draining", now: now)
        #expect(actions.contains(.closeConnection(attempt: 1, sendLogout: false)))
        let transition = actions.compactMap { if case .link(let t) = $0 { t } else { nil } }.first
        #expect(transition?.current == .disconnected)
        #expect(transition?.reason == .serverGoingAway)
        #expect(transition?.operation == .serverReject)
        let retry = actions.compactMap { if case .schedule(.retry, let at) = $0 { at } else { nil } }.first
        #expect(retry != nil && retry! >= now && retry! <= now + .milliseconds(500))
        #expect(machine.linkState == .disconnected)
        // Not connected (a later goaway, a stale attempt): nothing.
        #expect(machine.goAway(attempt: 1, spread: nil, message: "again", now: now).isEmpty)
    }
}
