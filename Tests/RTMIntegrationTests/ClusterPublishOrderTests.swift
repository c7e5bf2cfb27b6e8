import RTMBench
import RTMPostgres
import Testing
@testable import RTMServer

/// SPEC M-3 across nodes: a publisher's pipelined publishes keep their order through
/// the database.
extension ClusterTests {
    @Test("M-3: a connection's runs of one channel go to the backplane in read order, one call at a time; runs read meanwhile go together in the next; channels are independent")
    func clusterPublishQueueOrder() {
        var queue = ClusterPublishQueue<Int>()
        #expect(queue.add(1, channel: "a") == [1])
        #expect(queue.add(2, channel: "a") == nil)
        #expect(queue.add(10, channel: "b") == [10])
        #expect(queue.add(3, channel: "a") == nil)
        #expect(queue.finished(channel: "a") == [2, 3])
        #expect(queue.finished(channel: "b") == nil)
        #expect(queue.add(4, channel: "a") == nil)   // the call with 2 and 3 is in flight
        #expect(queue.finished(channel: "a") == [4])
        #expect(queue.finished(channel: "a") == nil)
        #expect(queue.add(5, channel: "a") == [5])
    }

    @Test("M-3: rtm bench's publishers pipeline binary publishes at full speed into two nodes; the subscribers on the other node get each publisher's messages in its order, none lost, none twice")
    func pipelinedPublishesKeepTheirOrderAcrossNodes() async throws {
        // (The race this guards against, two runs of one connection entering the database in
        // the wrong order, showed in release builds under `rtm bench cluster`; here the test
        // checks order and completeness end to end, not a rate.) The database calls are bound
        // at 30 s, not 5 s: a publish is refused once it waited its call bound (a rule with its
        // own tests, `ClusterDeadlineTests`), and at full speed on a loaded machine one can wait
        // its turn behind a slow disk's flush stalls for seconds.
        let (_, a, b) = try await Self.cluster(options: Self.options { $0.callTimeout = .seconds(30) })   // stopped by the .realTime trait's scope
        var options = BenchCounterTests.shortRun(port: a.port)
        options.nodes = [BenchEndpoint(host: "127.0.0.1", port: a.port), BenchEndpoint(host: "127.0.0.1", port: b.port)]
        options.placement = .remote
        options.groups = 8   // publishers 0, 2, … on A, 1, 3, … on B; each one's subscribers on the other node
        options.subscribersPerGroup = 2
        options.window = 512   // many publishes per read, several reads while a commit is in flight
        options.seconds = 1
        // What is published arrives everywhere: awaited up to 60 s (a loaded machine's database
        // can be seconds behind a full-speed run), not the benchmark's 3 s.
        options.stragglerSeconds = 60
        let result = try await LoadRun.run(options) { _ in }
        // Enough publishes to pipeline (hundreds per publisher on a quiet machine); a bound on
        // the test's worth, not a rate.
        #expect(result.published > 200, "\(result.text)")
        #expect(result.lost == 0 && result.outOfOrder == 0 && result.duplicated == 0 && result.undelivered == 0, "\(result.text)")
        #expect(result.disconnected == 0 && result.errors == 0, "\(result.text)")
    }
}
