import Testing
@testable import RTMServer

/// Cut off from the database or an outage for everyone, as a value (cluster: a node's lease ran
/// out while it could not reach the database).
struct PartitionWatchTests {
    @Test("P-1: a node whose lease ran out asks the others; one that reaches the database, and this node's own try after that answer failing, mean it is cut off: its clients are sent away once, /ready 503, until the lease is renewed")
    func cutOff() {
        var watch = PartitionWatch()
        #expect(watch.healthDetail.isEmpty)
        var ask = watch.lapsed(peers: ["b:1"])
        #expect(ask && watch.healthDetail == "lease: lapsed\n")
        ask = watch.lapsed(peers: ["b:1"])   // the next failed round: a question is in flight
        #expect(!ask)
        var found = watch.probed(othersReachDatabase: true)
        #expect(found == .othersReach && !watch.isCutOff && watch.healthDetail == "lease: lapsed\n")
        ask = watch.lapsed(peers: ["b:1"])   // its own try is in flight
        #expect(!ask && !watch.isCutOff)
        let cut = watch.confirmed(reachesDatabase: false)
        #expect(cut && watch.isCutOff)
        ask = watch.lapsed(peers: ["b:1"])   // known cut off: nothing more to ask or do
        #expect(!ask && watch.isCutOff)
        found = watch.probed(othersReachDatabase: true)
        #expect(found == .late)   // once per lapse
        let again = watch.confirmed(reachesDatabase: false)
        #expect(!again)
        watch.renewed()
        #expect(!watch.isCutOff && watch.healthDetail.isEmpty)
    }

    @Test("P-2: a node whose lease lapsed by its own clock but that reaches the database (woken from a pause: the renewal that spanned it failed by its deadline) is never cut off, whichever comes first: the others' answer, its own try, or the fence it learns")
    func reachableNodeIsNeverCutOff() {
        // Its own try reaches the database (renewed, or it found its fence): not cut off.
        var watch = PartitionWatch()
        var ask = watch.lapsed(peers: ["b:1"])
        var found = watch.probed(othersReachDatabase: true)
        var cut = watch.confirmed(reachesDatabase: true)
        #expect(ask && found == .othersReach && !cut)
        #expect(!watch.isCutOff && watch.phase == .joined)
        // The fence learned (a renewal) before the others answered: their answer is late.
        watch = PartitionWatch()
        ask = watch.lapsed(peers: ["b:1"])
        watch.renewed()
        found = watch.probed(othersReachDatabase: true)
        cut = watch.confirmed(reachesDatabase: false)
        #expect(ask && found == .late && !cut && !watch.isCutOff)
        // The fence learned while its own try was in flight: a try that fails then changes nothing.
        watch = PartitionWatch()
        ask = watch.lapsed(peers: ["b:1"])
        found = watch.probed(othersReachDatabase: true)
        watch.renewed()
        cut = watch.confirmed(reachesDatabase: false)
        #expect(ask && found == .othersReach && !cut && !watch.isCutOff && watch.phase == .joined)
        // Reached once, still lapsed at the next failed round: it asks again.
        watch = PartitionWatch()
        _ = watch.lapsed(peers: ["b:1"])
        _ = watch.probed(othersReachDatabase: true)
        cut = watch.confirmed(reachesDatabase: true)
        ask = watch.lapsed(peers: ["b:1"])
        #expect(!cut && ask)
    }

    @Test("P-1: nobody reaches the database (or nobody to ask): an outage for every node, clients stay; asked again at the next failed round, and cut off if another node reaches it by then and this one still does not")
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
        let cut = watch.confirmed(reachesDatabase: false)
        #expect(found == .othersReach && cut && watch.isCutOff)
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
