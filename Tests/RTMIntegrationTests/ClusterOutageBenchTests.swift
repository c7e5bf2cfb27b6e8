import Foundation
@testable import RTMBench
import RTMLocalPostgres
import RTMTestSupport
import Testing

/// `rtm bench cluster-outage` as a user runs it (the `rtm` binary, its own PostgreSQL, replica,
/// forwarders and nodes), shrunk to seconds: the report must show the fault and hold the
/// exactly-once verdict it claims.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ClusterOutageBenchTests {
    @Test("M-1, M-2, M-3: a database failover under SDK publishers: every publisher paused and was acknowledged again, every subscriber told of the new epoch, nothing acknowledged lost, duplicated or reordered, nothing failed to the app")
    func failoverReport() async throws {
        // The address moves 1.5 s after the kill: every publisher's pause is then longer than the
        // report's 1 s threshold however fast the promotion, so each counts as paused.
        let bench = try RTMProcess(arguments: ["bench", "cluster-outage", "--case", "failover", "--publishers", "2", "--subs", "1",
                                               "--rate", "10", "--before", "1", "--move-after", "1.5", "--after", "1", "--deadline", "30", "--settle", "30",
                                               "--base-port", "\(try LoopbackPort.freeRange(8))", "--json"])
        await bench.waitUntilExit()
        let output = bench.output
        #expect(bench.process.terminationStatus == 0, "\(output.suffix(20).joined(separator: "\n"))")
        guard let line = output.last(where: { $0.hasPrefix("{") }),
              let result = try? JSONDecoder().decode(OutageRun.Result.self, from: Data(line.utf8)) else {
            Issue.record("no report: \(output.suffix(20).joined(separator: "\n"))")
            return
        }
        #expect(result.publishers == 2 && result.subscribers == 2)
        #expect(result.paused == 2 && result.stuck == 0, "\(result.text)")
        #expect((result.ackedAgainMax ?? 0) > 0 && (result.ackedAgainMax ?? 99) < 15, "\(result.text)")
        #expect(result.gapUnknown == 2, "\(result.text)")
        #expect(result.isClean && result.failed == 0 && result.acknowledged > 10, "\(result.text)")
    }
}

/// The outage bench's own bookkeeping, as a value.
@Suite(.realTime)
struct OutageLedgerTests {
    @Test("rtm bench cluster-outage: an acknowledgement stamped after the clock reading it is compared with is recent (a publisher appends while the run checks), never a negative age")
    func ackAfterTheReadingIsRecent() {
        var ledger = OutageRun.Publisher.Ledger()
        #expect(!ledger.acknowledgedRecently(now: 5_000_000_000))
        ledger.acks.append(("p0-1", 5_000_000_001))
        #expect(ledger.acknowledgedRecently(now: 5_000_000_000))
        #expect(ledger.acknowledgedRecently(now: 5_900_000_000))
        #expect(!ledger.acknowledgedRecently(now: 6_000_000_001))
    }
}
