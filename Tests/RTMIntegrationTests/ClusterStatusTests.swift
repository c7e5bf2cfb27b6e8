import Logging
@testable import RTMServer
import Testing

/// What a node says of its database link (issue 13 item 7): `rtm_database_up`, `/health`.
struct ClusterStatusTests {
    /// `rtm_database_up` as `/metrics` renders it.
    private func gauge(_ metrics: ServerMetrics) -> Double? {
        metrics.render().split(separator: "\n").first { $0.hasPrefix("rtm_database_up ") }
            .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
    }

    @Test("issue 13 item 7: while the listening connection is lost, a commit that ends late does not bring the link back up; the listener's return does; a failed commit takes it down, a later success with the listener up brings it back")
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
}
