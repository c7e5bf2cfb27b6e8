import Foundation
import RTMAuth
import RTMServer
import Testing
@testable import RTMClient

/// The admin API against its OpenAPI document (`openapi/admin.yaml`), and the `rtm admin` CLI.
@Suite("Admin API conformance", .realTime, .serialized)
struct AdminConformanceTests {
    @Test("admin: the OpenAPI document validates, and every endpoint's real answers (2xx and errors) validate against it",
          .enabled(if: runsWhen(pythonHas(["yaml", "openapi_schema_validator", "openapi_spec_validator"]), orRequiredBy: "RTM_PYTHON_CHECKS"),
                   "needs the Python packages openapi-spec-validator and openapi-schema-validator (.ci/run installs them)"))
    func responsesMatchOpenAPI() async throws {
        let admin = try await AdminHarness.start()
        let (alice, _) = try await Harness.client("alice", port: admin.port)
        let (bob, _) = try await Harness.client("bob", port: admin.port)
        defer { Task { await alice.logout(); await bob.logout() } }
        try await alice.subscribe("room")
        try await bob.subscribe("room", options: SubscribeOptions(beQuiet: true))
        try await alice.setState(channel: "room", ["mood": "busy"])

        // Every operation, with its usual answers and its errors.
        try await admin.call("GET", "/console", key: nil)
        try await admin.call("GET", "/v1/info")
        try await admin.call("GET", "/v1/info", key: nil)
        try await admin.call("GET", "/v1/info", key: "wrong")
        try await admin.call("POST", "/v1/publish", body: ["channel": "room", "message": "hello"])
        try await admin.call("POST", "/v1/publish", body: ["channel": "room", "data": Data([1, 2, 3]).base64EncodedString(),
                                                            "customType": "bin", "storeInHistory": true])
        try await admin.call("POST", "/v1/publish", body: ["channel": "room"])
        try await admin.call("POST", "/v1/publish", body: ["channel": "bad name!", "message": "x"])
        try await admin.call("POST", "/v1/publish", body: ["channel": "room", "message": String(repeating: "x", count: 40_000)])
        try await admin.call("POST", "/v1/send", body: ["user": "alice", "message": "hi", "storeInHistory": true])
        try await admin.call("POST", "/v1/send", body: ["message": "no receiver"])
        try await admin.call("GET", "/v1/channels")
        try await admin.call("GET", "/v1/channels?appId=\(Harness.appId)")
        try await admin.call("GET", "/v1/channels?appId=unknown")
        try await admin.call("GET", "/v1/channels/room")
        try await admin.call("GET", "/v1/channels/nowhere")
        try await admin.call("GET", "/v1/sessions")
        let firstSessions = try await admin.call("GET", "/v1/sessions?limit=1")
        if let next = firstSessions.json["nextPage"] as? String { try await admin.call("GET", "/v1/sessions?limit=1&page=\(next)") }
        try await admin.call("GET", "/v1/sessions?limit=0")
        try await admin.call("GET", "/v1/sessions?page=!!")
        try await admin.call("GET", "/v1/channels?limit=1")
        try await admin.call("GET", "/v1/channels?limit=1001")
        try await admin.call("GET", "/v1/presence/whonow?channel=room&includeState=true")
        try await admin.call("GET", "/v1/presence/whonow")
        try await admin.call("GET", "/v1/presence/wherenow?user=alice")
        try await admin.call("GET", "/v1/presence/wherenow?user=ghost")
        try await admin.call("GET", "/v1/history?channel=room&count=10")
        try await admin.call("GET", "/v1/history?channel=alice:admin&channelType=user")
        try await admin.call("GET", "/v1/history?channel=room&count=1000")
        try await admin.call("POST", "/v1/disconnect", body: ["user": "bob", "reason": "rebalancing"])
        try await admin.call("POST", "/v1/disconnect", body: [:])
        try await admin.call("POST", "/v1/ban", body: ["user": "mallory", "seconds": 60, "reason": "spam"])
        try await admin.call("POST", "/v1/ban", body: ["user": "mallory", "seconds": -1])
        try await admin.call("GET", "/v1/bans")
        try await admin.call("POST", "/v1/unban", body: ["user": "mallory"])
        try await admin.call("POST", "/v1/unban", body: ["user": ""])
        try await admin.call("POST", "/v1/kick", body: ["user": "alice", "reason": "bye", "banSeconds": 1])
        try await admin.call("POST", "/v1/kick", body: ["user": "nobody"])
        try await admin.call("POST", "/v1/kick", body: ["reason": "who?"])
        try await admin.call("POST", "/v1/revoke", body: ["token": Harness.token("bob")])
        try await admin.call("POST", "/v1/revoke", body: ["user": "bob"])
        try await admin.call("POST", "/v1/revoke", body: [:])
        // Refusals the spec must express as well (check_exchanges.py: a 400 breaks the spec too).
        try await admin.call("POST", "/v1/publish", body: ["channel": "room", "message": "x", "data": "AQ=="])
        try await admin.call("POST", "/v1/publish", body: ["channel": String(repeating: "c", count: 65), "message": "x"])
        try await admin.call("GET", "/v1/presence/wherenow?user=null")
        try await admin.call("POST", "/v1/ban", body: ["user": "mallory", "seconds": 60, "appId": ""])
        // An app id the server does not serve: 404 wherever an app id is taken.
        try await admin.call("GET", "/v1/sessions?appId=unknown")
        try await admin.call("GET", "/v1/presence/whonow?channel=room&appId=unknown")
        try await admin.call("POST", "/v1/kick", body: ["user": "alice", "appId": "unknown"])
        try await admin.call("POST", "/v1/publish", body: ["channel": "room", "message": "x", "appId": "unknown"])

        let exchanges = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-admin-exchanges-\(UUID()).json").path
        try admin.exchanges.write(to: exchanges)
        defer { try? FileManager.default.removeItem(atPath: exchanges) }
        let python = try #require(python3, "python3 is needed for the OpenAPI check (.ci/run installs its packages)")
        let result = try await runProgram(python, ["\(packageRoot)/openapi/check_exchanges.py", "\(packageRoot)/openapi/admin.yaml", exchanges])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("0 failures"), "\(result.output)")
    }

    @Test("admin: every `rtm admin` verb works against a real server; a wrong key exits non-zero with the server's message")
    func cliVerbs() async throws {
        let admin = try await AdminHarness.start()
        let (alice, events) = try await Harness.client("alice", port: admin.port)
        defer { Task { await alice.logout() } }
        try await alice.subscribe("room")
        let environment = ["RTM_ADMIN_URL": admin.baseURL, "RTM_ADMIN_KEY": AdminHarness.key]
        let rtm = RTMProcess.binary.path
        func run(_ arguments: String...) async throws -> String {
            let result = try await runProgram(rtm, ["admin"] + arguments, environment: environment)
            #expect(result.status == 0, "rtm admin \(arguments.joined(separator: " ")): \(result.output)")
            return result.output
        }
        #expect(try await run("info").contains("\"version\" : \"0.14.0\""))
        #expect(try await run("publish", "room", "from the cli", "--store").contains("\"seq\" : 1"))
        #expect(await events.first(within: soon) { $0.messageEvent?.text == "from the cli" } != nil)
        #expect(try await run("send", "alice", "psst").contains("\"receiverOnline\" : true"))
        #expect(try await run("channels").contains("\"name\" : \"room\""))
        #expect(try await run("channel", "room").contains("from the cli"))
        #expect(try await run("sessions").contains("\"userId\" : \"alice\""))
        #expect(try await run("whonow", "room").contains("\"alice\""))
        #expect(try await run("wherenow", "alice").contains("\"room\""))
        _ = try await run("history", "room")
        #expect(try await run("disconnect", "alice", "--reason", "cli test").contains("\"disconnected\" : true"))
        #expect(await events.first(within: soon) { $0.link?.isResumed == true } != nil)
        #expect(try await run("ban", "mallory", "30").contains("bannedUntil"))
        #expect(try await run("bans").contains("mallory"))
        #expect(try await run("unban", "mallory").contains("\"unbanned\" : true"))
        #expect(try await run("kick", "alice", "--reason", "done").contains("\"sessionEnded\" : true"))
        #expect(try await run("revoke", "--user", "alice").contains("\"scope\" : \"user\""))
        let refused = try await runProgram(rtm, ["admin", "info", "--admin-key", "wrong"], environment: ["RTM_ADMIN_URL": admin.baseURL])
        #expect(refused.status != 0)
        #expect(refused.output.contains("admin API answered 401: wrong admin key"))
    }
}
