import NIOCore
import Testing
@testable import RTMServer

/// A warning a flood repeats by the thousand is one line per interval, saying how many were held back.
struct LogThrottleTests {
    @Test("One line per interval; the next line says how many were held back")
    func onePerInterval() {
        let throttle = LogThrottle(interval: .seconds(10))
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let first = throttle.admit(now: t0)
        #expect(first.log && first.suppressed == 0)
        for i in 1...500 { #expect(!throttle.admit(now: t0 + .milliseconds(Int64(i))).log) }
        let next = throttle.admit(now: t0 + .seconds(10))
        #expect(next.log && next.suppressed == 500)
        let quiet = throttle.admit(now: t0 + .seconds(30))
        #expect(quiet.log && quiet.suppressed == 0)
    }
}
