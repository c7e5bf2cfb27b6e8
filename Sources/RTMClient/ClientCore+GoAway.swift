import NIOCore
import RTMProtocol

extension ClientCore {
    /// A `goaway` frame (the server drains or shuts down, PROTOCOL.md §3.4): on a connected
    /// link the machine reports the loss (reason `serverGoingAway`) and schedules the retry
    /// within the server's `reconnectDelay` spread; the next attempt takes the next endpoint.
    /// During a login attempt the connection just closes and the attempt fails as usual.
    func goAway(_ frame: Frame, attempt: UInt64) {
        let message = goAwayReason ?? "server going away"
        guard machine.linkState == .connected else {
            connection?.channel?.close(promise: nil)
            return
        }
        let spread = frame.reconnectDelay.map { Double(max($0, 0)) / 1000 }
        goAwayReason = nil
        run(machine.goAway(attempt: attempt, spread: spread, message: message, now: .now()))
    }
}
