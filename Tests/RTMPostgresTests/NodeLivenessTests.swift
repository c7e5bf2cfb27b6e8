import NIOCore
import RTMPostgres
import RTMServer
import Testing

/// Node leases as a pure value, with time passed in: deaths and returns reported once each.
@Suite(.realTime)
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

    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test("P-2: a node whose lease passed is declared dead once; renewing again brings it back; the live count follows")
    func deathsAndReturns() {
        var liveness = NodeLiveness(me: "a", lease: .seconds(10))
        liveness.lostSight()   // before the first check: no pause
        #expect(describe(liveness.observe(["a": true, "b": true], at: start)) == ["live 2"])
        #expect(describe(liveness.observe(["a": true, "b": true], at: start)).isEmpty)
        #expect(describe(liveness.observe(["a": true, "b": false, "c": false], at: start)) == ["died b", "died c", "live 1"])
        #expect(describe(liveness.observe(["a": true, "b": false, "c": false], at: start)).isEmpty)
        #expect(describe(liveness.observe(["a": true, "b": true, "c": false], at: start)) == ["back b", "live 2"])
        #expect(liveness.dead == ["c"])
        // Its own lapsed lease is not a death it declares.
        #expect(describe(liveness.observe(["a": false, "b": true], at: start)) == ["live 1"])
        #expect(liveness.dead.isEmpty)
    }

    @Test("P-2: a death the database did not confirm (the node renewed before it could be declared dead) is undeclared and judged again at the next check")
    func undeclared() {
        var liveness = NodeLiveness(me: "a", lease: .seconds(10))
        #expect(describe(liveness.observe(["a": true, "b": true], at: start)) == ["live 2"])
        #expect(describe(liveness.observe(["a": true, "b": false], at: start)) == ["died b", "live 1"])
        liveness.undeclare("b")
        #expect(liveness.dead.isEmpty)
        #expect(describe(liveness.observe(["a": true, "b": false], at: start)) == ["died b"])
        liveness.undeclare("b")
        #expect(describe(liveness.observe(["a": true, "b": true], at: start)) == ["live 2"])
    }

    @Test("P-2: after this node lost sight of the database, nobody is declared dead for a lease: the others' leases lapsed in the outage too; one that does not renew within it is")
    func pauseAfterOutage() {
        var liveness = NodeLiveness(me: "a", lease: .seconds(10))
        // Failures before the first check (the pool not running yet) do not pause anything.
        liveness.lostSight()
        #expect(describe(liveness.observe(["a": true, "b": true, "c": true], at: start)) == ["live 3"])
        liveness.lostSight()
        liveness.lostSight()
        // Back after the outage: every lease lapsed; b and c are given a lease to renew.
        let back = start + .seconds(30)
        #expect(describe(liveness.observe(["a": true, "b": false, "c": false], at: back)).isEmpty)
        #expect(describe(liveness.observe(["a": true, "b": true, "c": false], at: back + .seconds(2))).isEmpty)
        #expect(liveness.dead.isEmpty)
        // c never renews: declared dead once the pause is over.
        #expect(describe(liveness.observe(["a": true, "b": true, "c": false], at: back + .seconds(10))) == ["died c", "live 2"])
        #expect(liveness.dead == ["c"])
        // A second outage does not bring c back, nor declare b dead early.
        liveness.lostSight()
        let again = back + .seconds(60)
        #expect(describe(liveness.observe(["a": true, "b": false, "c": false], at: again)).isEmpty)
        #expect(describe(liveness.observe(["a": true, "b": false, "c": false], at: again + .seconds(11))) == ["died b", "live 1"])
    }
}
