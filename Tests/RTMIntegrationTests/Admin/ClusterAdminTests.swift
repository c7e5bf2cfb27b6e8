import Foundation
import RTMPostgres
import RTMServer
import Testing
@testable import RTMClient

/// The admin API and console of a cluster: any node shows every node and every node's
/// sessions (real nodes on a real PostgreSQL, real SDK clients).
extension ClusterTests {
    @Test("admin in a cluster: /v1/info lists every node (this one, the others alive, with their sessions; a node started later learns the ones without sessions) and /v1/sessions every node's sessions with their node; the answers match openapi/admin.yaml")
    func adminShowsEveryNode() async throws {
        let (database, location, logger) = try await Self.database()
        defer { database.destroy() }
        func node(_ name: String) async throws -> AdminHarness {
            try await AdminHarness.start {
                $0.backplane = PostgresChannelBackplane(location: location, node: name, options: Self.options(), logger: logger)
            }
        }
        let a = try await node("a")
        let idle = try await node("idle")   // no sessions: known to a later node through its answer to the hello
        let b = try await node("b")
        let (alice, _) = try await ClusterTests.client("alice", port: a.port)
        let (bob, _) = try await ClusterTests.client("bob", port: b.port)
        try await alice.subscribe("room")
        #expect(await waitUntil { b.harness.server.members(appId: Harness.appId, channel: "room") == ["alice"] })

        let info = try await b.call("GET", "/v1/info").json
        let cluster = try #require(info["cluster"] as? [String: Any], "\(info)")
        #expect(cluster["node"] as? String == "b" && cluster["database"] as? String == "up")
        let nodes = (cluster["nodes"] as? [[String: Any]] ?? []).map { "\($0["node"] ?? "") \($0["state"] ?? "") \($0["sessions"] ?? "")" }
        #expect(nodes == ["b this 1", "a alive 1", "idle alive 0"], "\(cluster)")
        let sessions = try await b.call("GET", "/v1/sessions").json["sessions"] as? [[String: Any]] ?? []
        let listed = sessions.map { "\($0["userId"] ?? "") \($0["node"] ?? "") \($0["online"] ?? "") \($0["connection"] == nil ? "remote" : "local")" }
        #expect(listed == ["alice a 1 remote", "bob b 1 local"], "\(sessions)")
        #expect(sessions.first?["channels"] as? [String] == ["room"])
        // A single node says nothing of a cluster.
        let single = try await AdminHarness.start()
        #expect(try await single.call("GET", "/v1/info").json["cluster"] == nil)
        await single.stop()

        await alice.logout()
        await bob.logout()
        if let python = python3, pythonHas(["yaml", "openapi_schema_validator", "openapi_spec_validator"]) {
            let exchanges = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-admin-cluster-\(UUID()).json").path
            try b.exchanges.write(to: exchanges)
            defer { try? FileManager.default.removeItem(atPath: exchanges) }
            let result = try await runProgram(python, ["\(packageRoot)/openapi/check_exchanges.py", "\(packageRoot)/openapi/admin.yaml", exchanges, "--partial"])
            #expect(result.status == 0 && result.output.contains("0 failures"), "\(result.output)")
        }
        for node in [a, idle, b] { await node.stop() }
    }
}
