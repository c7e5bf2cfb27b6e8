import Testing
@testable import RTMServer

/// Cut off from the database or an outage for everyone, as a value (cluster: a node's lease ran
/// out while it could not reach the database).
struct PartitionWatchTests {
    @Test("P-1: a node whose lease ran out asks the others; one that reaches the database means this node is cut off: its clients are sent away once, /ready 503, until the lease is renewed")
    func cutOff() {
        var watch = PartitionWatch()
        #expect(watch.healthDetail.isEmpty)
        var ask = watch.lapsed(peers: ["b:1"])
        #expect(ask && watch.healthDetail == "lease: lapsed\n")
        ask = watch.lapsed(peers: ["b:1"])   // the next failed round: a question is in flight
        #expect(!ask)
        var found = watch.probed(othersReachDatabase: true)
        #expect(found == .cutOff && watch.isCutOff)
        ask = watch.lapsed(peers: ["b:1"])   // known cut off: nothing more to ask or do
        #expect(!ask && watch.isCutOff)
        found = watch.probed(othersReachDatabase: true)
        #expect(found == .late)   // once per lapse
        watch.renewed()
        #expect(!watch.isCutOff && watch.healthDetail.isEmpty)
    }

    @Test("P-1: nobody reaches the database (or nobody to ask): an outage for every node, clients stay; asked again at the next failed round, and cut off if another node reaches it by then")
    func outageForEveryone() {
        var watch = PartitionWatch()
        var ask = watch.lapsed(peers: [])
        #expect(!ask && watch.phase == .alone && !watch.isCutOff)
        ask = watch.lapsed(peers: ["b:1", "c:1"])
        #expect(ask)
        var found = watch.probed(othersReachDatabase: false)
        #expect(found == .alone(first: false) && watch.phase == .alone)   // the empty list was the first
        #expect(watch.healthDetail == "lease: lapsed (no other node reaches the database)\n")
        ask = watch.lapsed(peers: ["b:1", "c:1"])
        #expect(ask)
        found = watch.probed(othersReachDatabase: true)
        #expect(found == .cutOff && watch.isCutOff)
        watch.renewed()
        ask = watch.lapsed(peers: ["b:1"])
        found = watch.probed(othersReachDatabase: false)
        #expect(ask && found == .alone(first: true))   // a new lapse: logged again
    }

    @Test("P-1: an answer that comes after the lease was renewed changes nothing")
    func lateAnswer() {
        var watch = PartitionWatch()
        let ask = watch.lapsed(peers: ["b:1"])
        #expect(ask)
        watch.renewed()
        let found = watch.probed(othersReachDatabase: true)
        #expect(found == .late && watch.phase == .joined)
    }
}
