import Foundation
import RTMAuth
import RTMServer
import Testing
@testable import RTMClient

/// The admin API against its OpenAPI document (`openapi/admin.yaml`), and the `rtm admin` CLI.
@Suite("Admin API conformance", .realTime, .serialized)
struct AdminConformanceTests {
    /// The checks through `openapi/check_exchanges.py` run when its Python packages are there, and
    /// always in CI (`RTM_PYTHON_CHECKS=1`).
    static let openAPICheckers: ConditionTrait = .enabled(
        if: runsWhen(pythonHas(["yaml", "openapi_schema_validator", "openapi_spec_validator"]), orRequiredBy: "RTM_PYTHON_CHECKS"),
        "needs the Python packages openapi-spec-validator and openapi-schema-validator (.ci/run installs them)")

    @Test("admin: the OpenAPI document validates, and every endpoint's real answers (2xx and errors) validate against it",
          AdminConformanceTests.openAPICheckers)
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

    @Test("admin: the requests schemathesis found at the document's edges are answered as the document says: a null field, an empty appId, a name with foreign characters refused with 400; any cursor of the documented form accepted; a channel that cannot exist answered 404",
          AdminConformanceTests.openAPICheckers)
    func documentEdges() async throws {
        let admin = try await AdminHarness.start()
        defer { Task { await admin.stop() } }
        func expect(_ method: String, _ path: String, body: [String: Any]? = nil, _ status: Int, _ message: String? = nil,
                    sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let answer = try await admin.call(method, path, body: body)
            #expect(answer.status == status, "\(method) \(path): \(answer.json)", sourceLocation: sourceLocation)
            if let message {
                #expect(answer.json["message"] as? String == message, "\(method) \(path)", sourceLocation: sourceLocation)
            }
        }
        // No request field is nullable: null was taken as "left out" (200).
        for path in ["/v1/ban", "/v1/kick", "/v1/disconnect", "/v1/unban"] {
            var body: [String: Any] = ["appId": NSNull(), "user": "0", "reason": ""]
            if path == "/v1/ban" { body["seconds"] = Double.leastNonzeroMagnitude }
            try await expect("POST", path, body: body, 400, "null for field 'appId': expected a string")
        }
        try await expect("POST", "/v1/revoke", body: ["appId": Harness.appId, "reason": NSNull(), "token": "x", "user": "0"], 400,
                         "null for field 'reason': expected a string")
        try await expect("POST", "/v1/publish", body: ["channel": "room", "message": "x", "customType": NSNull()], 400,
                         "null for field 'customType': expected a string")
        // A null under a key the body does not know is ignored with the key.
        try await expect("POST", "/v1/unban", body: ["user": "0", "NUL": [false, NSNull()], "other": NSNull()], 200)
        // An empty appId breaks the document's minLength (it was a 404 revoke did not document).
        try await expect("POST", "/v1/revoke", body: ["appId": "", "user": "d.m"], 400, "appId is empty: name an app, or leave appId out")
        try await expect("GET", "/v1/bans?appId=", 400)
        try await expect("POST", "/v1/revoke", body: ["appId": "unknown", "user": "d.m"], 404)
        // Beside a token, a user and an app id are checked too (they were ignored).
        try await expect("POST", "/v1/revoke", body: ["token": "x", "user": "null"], 400)
        // publisher and from are user ids, as the document now says.
        try await expect("POST", "/v1/publish", body: ["publisher": "\u{CA}Y\u{EB}", "channel": "Ld1Lo", "data": "Vw=="], 400)
        try await expect("POST", "/v1/send", body: ["from": "\u{99}l@", "user": "!", "data": "lg0="], 400)
        // A text without NUL (M-1, §2.8: no store keeps it whole); over the admin API also when
        // not kept in history (the document cannot tie one field's rule to another).
        try await expect("POST", "/v1/send", body: ["user": "bob", "message": "zero\u{0}byte"], 400,
                         "text contains the NUL character (U+0000), which a stored message cannot hold: send it as binary data")
        try await expect("POST", "/v1/publish", body: ["channel": "room", "message": "zero\u{0}byte", "storeInHistory": true], 400)
        try await expect("POST", "/v1/publish", body: ["channel": "room", "message": "zero\u{0}byte"], 400)
        try await expect("POST", "/v1/publish", body: ["channel": "room", "data": "AA=="], 200)
        // A ban through kick is bounded as /v1/ban's.
        try await expect("POST", "/v1/kick", body: ["user": "0", "banSeconds": 1e9], 400)
        // Paging cursors: any of the documented form is a place; "0" is not of the form.
        try await expect("GET", "/v1/channels?page=0", 400)
        try await expect("GET", "/v1/sessions?page=0", 400)
        try await expect("GET", "/v1/sessions?page=AAAA", 200)
        try await expect("GET", "/v1/channels?page=not-a-cursor", 200)
        // includeState is a boolean.
        try await expect("GET", "/v1/presence/whonow?channel=room&includeState=maybe", 400,
                         "query parameter 'includeState' must be true or false, got 'maybe'")
        try await expect("GET", "/v1/sessions?limit=x", 400, "query parameter 'limit' must be a whole number (at most 64 bits), got 'x'")
        try await expect("GET", "/v1/history?channel=room&channelType=bogus", 400,
                         "query parameter 'channelType' must be 'message' or 'user', got 'bogus'")
        try await expect("GET", "/v1/presence/wherenow", 400, "missing query parameter 'user'")
        // History: an empty channel breaks the document (minLength); one that names no possible
        // channel or conversation is not found.
        try await expect("GET", "/v1/history?channel=&start=0", 400, "missing query parameter 'channel'")
        try await expect("GET", "/v1/history?channel=abc&channelType=user", 404)
        try await expect("GET", "/v1/history?channel=alice:null&channelType=user", 404)
        try await expect("GET", "/v1/history?channel=\(String(repeating: "c", count: 65))", 404)
        try await expect("GET", "/v1/history?channel=\(String(repeating: "c", count: 64)):\(String(repeating: "d", count: 64))&channelType=user", 200)
        try await expect("GET", "/v1/history?channel=\(String(repeating: "c", count: 130))", 400)
        // Times are 64-bit, as the document now bounds them.
        try await expect("GET", "/v1/history?channel=room&start=238992996631849214302689951744", 400)
        try await expect("GET", "/v1/history?channel=room&end=9223372036854775807", 200)

        let exchanges = FileManager.default.temporaryDirectory.appendingPathComponent("rtm-admin-edges-\(UUID()).json").path
        try admin.exchanges.write(to: exchanges)
        defer { try? FileManager.default.removeItem(atPath: exchanges) }
        let python = try #require(python3)
        let result = try await runProgram(python, ["\(packageRoot)/openapi/check_exchanges.py", "--partial", "\(packageRoot)/openapi/admin.yaml", exchanges])
        #expect(result.status == 0, "\(result.output)")
    }

    @Test("admin: a method the document does not list for /console (TRACE, POST) is answered 405 with Allow: GET, as on every endpoint; a body that is not JSON by its Content-Type, 415")
    func consoleMethods() async throws {
        let admin = try await AdminHarness.start()
        defer { Task { await admin.stop() } }
        let curl = try #require(program(named: "curl"), "curl is needed to send TRACE")
        for method in ["TRACE", "POST", "DELETE"] {
            let result = try await runProgram(curl, ["-sS", "-i", "--max-time", "10", "-X", method, "\(admin.baseURL)/console"])
            #expect(result.output.hasPrefix("HTTP/1.1 405"), "\(method): \(result.output)")
            #expect(result.output.lowercased().contains("allow: get"), "\(method): \(result.output)")
        }
        #expect(try await admin.call("GET", "/console", key: nil).status == 200)
        let form = try await runProgram(curl, ["-sS", "-i", "--max-time", "10", "-H", "Authorization: Bearer \(AdminHarness.key)",
                                               "-d", #"{"channel":"room","message":"x"}"#, "\(admin.baseURL)/v1/publish"])
        #expect(form.output.hasPrefix("HTTP/1.1 415"), "\(form.output)")
        #expect(form.output.contains("the body must be JSON"), "\(form.output)")
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
