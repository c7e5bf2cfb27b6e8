import NIOCore
import Testing
@testable import RTMServer

/// The server's own lateness is not the client's fault (SPEC T-3, PROTOCOL §3 and §7), as
/// values: a passed deadline waits for an I/O pass, and the publish bucket holds what a late
/// read brings.
struct LatenessTests {
    @Test("T-3: a passed deadline is confirmed only after two more ticks (one whole I/O pass since it was found)")
    func deadlineWaitsForAnIOPass() {
        var suspects = DeadlineSuspects<Int>()
        let step1 = suspects.passed(1, completedTicks: 10)   // found passed: marked
        #expect(!step1)
        let step2 = suspects.passed(1, completedTicks: 10)   // same tick: the sweep ran again before any I/O
        #expect(!step2)
        let step3 = suspects.passed(1, completedTicks: 11)   // the tick that found it ended; no pass began after the mark yet
        #expect(!step3)
        let step4 = suspects.passed(1, completedTicks: 12)    // a whole pass ran after the mark, and still nothing read
        #expect(step4)
        #expect(suspects.isEmpty)
    }

    @Test("T-3: a frame read before the confirmation clears the suspect; a later passed deadline starts over")
    func frameClearsTheSuspect() {
        var suspects = DeadlineSuspects<Int>()
        let step5 = suspects.passed(7, completedTicks: 3)
        #expect(!step5)
        suspects.clear(7)   // its ping was waiting in the socket: read in the next pass
        #expect(suspects.isEmpty)
        let step6 = suspects.passed(7, completedTicks: 20)
        #expect(!step6)
        let step7 = suspects.passed(7, completedTicks: 21)
        #expect(!step7)
        let step8 = suspects.passed(7, completedTicks: 22)
        #expect(step8)
    }

    @Test("§7: a compliant stream read late in one go is not a burst; the long-run rate holds")
    func lateReadIsNotABurst() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        // 60/s, bucket of 60. A client sends 50/s, but the server reads 2 s of it at once.
        var onTime = RateLimiter(ratePerSecond: 60)
        var late = RateLimiter(ratePerSecond: 60)
        _ = onTime.tryAcquire(now: start)
        _ = late.tryAcquire(now: start)
        let read = start + .seconds(2)
        let acceptedWithoutLateness = (0..<100).filter { _ in onTime.tryAcquire(now: read) }.count
        let acceptedWithLateness = (0..<100).filter { _ in late.tryAcquire(now: read, lateness: .seconds(2)) }.count
        #expect(acceptedWithoutLateness == 60)   // the bucket's cap: 40 of a compliant stream refused
        #expect(acceptedWithLateness == 100)
        // A flood read late still gets no more than the rate over time.
        var flood = RateLimiter(ratePerSecond: 60)
        var accepted = 0
        for second in 1...10 {
            let now = start + .seconds(Int64(second))
            accepted += (0..<1000).filter { _ in flood.tryAcquire(now: now, lateness: .seconds(1)) }.count
        }
        #expect(accepted <= 60 + 60 * 10 + 60)
    }
}
