import RTMPostgres
import RTMServer
import Testing

/// Node leases as a pure value (issue 13 item 5): deaths and returns reported once each.
struct NodeLivenessTests {
    private func describe(_ events: [BackplaneEvent]) -> [String] {
        events.map { event in
            switch event {
            case .nodeDied(let node): "died \(node)"
            case .nodeReturned(let node): "back \(node)"
            case .liveNodes(let count): "live \(count)"
            default: "other"
            }
        }
    }

    @Test("issue 13: a node whose lease passed is declared dead once; renewing again brings it back; the live count follows")
    func deathsAndReturns() {
        var liveness = NodeLiveness(me: "a")
        #expect(describe(liveness.observe(["a": true, "b": true])) == ["live 2"])
        #expect(describe(liveness.observe(["a": true, "b": true])).isEmpty)
        #expect(describe(liveness.observe(["a": true, "b": false, "c": false])) == ["died b", "died c", "live 1"])
        #expect(describe(liveness.observe(["a": true, "b": false, "c": false])).isEmpty)
        #expect(describe(liveness.observe(["a": true, "b": true, "c": false])) == ["back b", "live 2"])
        #expect(liveness.dead == ["c"])
        // Its own lapsed lease is not a death it declares.
        #expect(describe(liveness.observe(["a": false, "b": true])) == ["live 1"])
        #expect(liveness.dead.isEmpty)
    }
}
