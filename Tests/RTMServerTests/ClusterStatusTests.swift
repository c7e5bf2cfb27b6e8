import Logging
import NIOCore
@testable import RTMServer
import Testing

/// What a node says of its database link: `rtm_database_up`, `/health`.
struct ClusterStatusTests {
    /// `rtm_database_up` as `/metrics` renders it.
    private func gauge(_ metrics: ServerMetrics) -> Double? {
        metrics.render().split(separator: "\n").first { $0.hasPrefix("rtm_database_up ") }
            .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
    }

    @Test("While the listening connection is lost, a commit that ends late does not bring the link back up; the listener's return does; a failed commit takes it down, a later success with the listener up brings it back")
    func listenerIsTheAuthorityWhileLost() {
        let metrics = ServerMetrics()
        let status = ClusterStatus(metrics: metrics, enabled: true, logger: Logger(label: "test"))
        #expect(status.databaseUp && gauge(metrics) == 1)
        status.setDatabase(up: false, reason: "listener lost", from: .listener)
        #expect(!status.databaseUp && gauge(metrics) == 0)
        // A publish sent before the loss, committed and answered after it (seen in CI: the node
        // then said "up" for good with the database stopped).
        status.setDatabase(up: true, reason: "a publish was committed", from: .commit)
        #expect(!status.databaseUp && gauge(metrics) == 0)
        #expect(status.healthDetail == "database: down\n")
        status.setDatabase(up: true, reason: "listener back", from: .listener)
        #expect(status.databaseUp && gauge(metrics) == 1)
        status.setDatabase(up: false, reason: "a publish failed", from: .commit)
        #expect(!status.databaseUp)
        status.setDatabase(up: true, reason: "a publish was committed", from: .commit)
        #expect(status.databaseUp && gauge(metrics) == 1)
    }

    @Test("M-1: down on a failed commit (the listener up), one commit is let through per probe interval, so that its success can bring the link back; none while the listener is lost")
    func probesWhileDownOnACommit() {
        let status = ClusterStatus(metrics: ServerMetrics(), enabled: true, probeInterval: .milliseconds(200), logger: Logger(label: "test"))
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        #expect(status.admitsCommit(now: start) && status.admitsCommit(now: start))   // up: every commit
        status.setDatabase(up: false, reason: "a publish failed", from: .commit)
        #expect(status.admitsCommit(now: start))    // the probe
        #expect(!status.admitsCommit(now: start + .milliseconds(199)))   // the others are refused at once
        #expect(status.admitsCommit(now: start + .milliseconds(200)))    // the next probe
        status.setDatabase(up: true, reason: "a publish was committed", from: .commit)
        #expect(status.admitsCommit(now: start + .milliseconds(201)))
        // The listening connection lost: no probe; its return is what brings the link back.
        status.setDatabase(up: false, reason: "listener lost", from: .listener)
        #expect(!status.admitsCommit(now: start + .seconds(5)))
    }

    private struct SlowAppend: DatabaseTimeout {
        var description: String { "the database did not answer an append within 1.0 s" }
    }

    private struct LibraryError: Error, CustomStringConvertible {
        var description: String { "PSQLError(code: connectionError)" }
    }

    @Test("M-3: a refused publish says in our words whether anything was stored: refused at once (nothing stored) or failed during the commit (outcome unknown: resend with the same msgId); never a library's error text")
    func commitFailureReasons() {
        #expect(ClusterCommitFailure.reason(DatabaseLinkDown())
            == "the cluster's database is unreachable from this node: nothing was stored; retry later")
        #expect(ClusterCommitFailure.reason(CancellationError())
            == "the database link was lost during the commit: the outcome is unknown; resend with the same msgId")
        #expect(ClusterCommitFailure.reason(SlowAppend())
            == "the database did not answer an append within 1.0 s: the outcome is unknown; resend with the same msgId")
        let other = ClusterCommitFailure.reason(LibraryError())
        #expect(other == "the database connection failed during the commit: the outcome is unknown; resend with the same msgId")
        #expect(!other.contains("PSQLError") && !other.contains("Cancellation"))
    }
}
