import Testing
@testable import RTMServer

/// Which commits a fenced node may still make, as a value (P-2 from the others' side).
struct FenceGateTests {
    @Test("P-2: a fence refuses every later commit of connections accepted before it; connections accepted after it commit")
    func fenceEndsAGeneration() {
        var gate = FenceGate()
        let r1 = gate.begin(accepted: 0)
        #expect(r1)
        let r2 = gate.end(accepted: 0)
        #expect(!r2)   // no fence waits
        let r3 = gate.fence()
        #expect(!r3)   // nothing under way: dealt with at once
        #expect(gate.generation == 1)
        let r4 = gate.begin(accepted: 0)
        #expect(!r4)
        let r5 = gate.begin(accepted: 1)
        #expect(r5)
    }

    @Test("P-2: a fence is dealt with (the node joins again) only once the commits admitted before it ended, whatever the later generation does")
    func fenceWaitsForCommitsUnderWay() {
        var gate = FenceGate()
        let r6 = gate.begin(accepted: 0)
        #expect(r6)
        let r7 = gate.begin(accepted: 0)
        #expect(r7)
        let r8 = gate.fence()
        #expect(r8)   // two under way: wait
        let r9 = gate.begin(accepted: 1)
        #expect(r9)   // a new connection's commit does not hold the fence
        let r10 = gate.end(accepted: 1)
        #expect(!r10)
        let r11 = gate.end(accepted: 0)
        #expect(!r11)
        let r12 = gate.end(accepted: 0)
        #expect(r12)   // the last one: the fence may go on
        let r13 = gate.fence()
        #expect(!r13)   // a second fence with nothing under way
        #expect(gate.generation == 2)
    }
}
