import Foundation
import NIOCore
import RTMProtocol
@testable import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// `GET /metrics`: scraped over HTTP from a real server while real clients publish,
/// send user messages, log in with bad tokens and leave; the Prometheus text is parsed and the
/// values must move by what the traffic did.
@Suite(.realTime, .serialized)
struct MetricsTests {
    /// One scrape: `name{labels}` → value, as the Prometheus text format prints them.
    struct Scrape {
        let values: [String: Double]
        let text: String

        init(_ response: String) throws {
            let parts = response.components(separatedBy: "\r\n\r\n")
            try #require(parts.count >= 2 && parts[0].hasPrefix("HTTP/1.1 200"), "not a 200: \(response.prefix(200))")
            text = parts.dropFirst().joined(separator: "\r\n\r\n")
            var values: [String: Double] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
                values[String(line[..<space])] = value
            }
            self.values = values
        }

        subscript(_ key: String) -> Double { values[key] ?? 0 }
    }

    static func scrape(_ port: Int) async throws -> Scrape {
        try Scrape(try await StreamTests.httpGet("/metrics", port: port))
    }

    @Test("Every metric family has a # HELP line right before its # TYPE line (the Prometheus text format, promtool)")
    func everyFamilyHasHelp() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        _ = try await alice.subscribe("room")
        let lines = try await Self.scrape(harness.port).text.split(separator: "\n")
        let families = lines.filter { $0.hasPrefix("# TYPE ") }
        #expect(families.count >= 20)
        for (index, line) in lines.enumerated() where line.hasPrefix("# TYPE ") {
            let name = line.dropFirst(7).split(separator: " ")[0]
            #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "no HELP for \(name)")
        }
        await alice.logout()
    }

    @Test("The process's own figures (memory, descriptors, CPU, threads, start time) under the usual process_* names, the build's version, and refused requests by request type and error code")
    func processBuildAndRefusals() async throws {
        let harness = try await Harness.start()
        let before = try await Self.scrape(harness.port)
        // A raw client (the SDK checks names itself): two subscribes to an invalid name, -10008.
        let client = try await JSONPublishTests.RawClient(port: harness.port)
        let login = Frame(type: .login, id: 1, appId: Harness.appId, userId: "alice", token: Harness.token("alice"))
        let bad = (2...3).map { Frame(type: .subscribe, id: UInt64($0), channel: "bad/name") }
        try await client.send(([login] + bad).map { JSONPublishTests.text(String(buffer: FrameCodec.encode($0))) })
        let replies = try await client.waitFor { $0.count >= 3 }
        #expect(replies.count == 3 && replies.dropFirst().allSatisfy { String(buffer: $0.payload).contains("-10008") })
        let after = try await Self.scrape(harness.port)
        #expect(after["rtm_requests_refused_total{operation=\"subscribe\",code=\"invalidChannelName\"}"] - before["rtm_requests_refused_total{operation=\"subscribe\",code=\"invalidChannelName\"}"] == 2)
        #expect(after["rtm_build_info{version=\"\(RTMServer.version)\"}"] == 1)
        let resident = after["process_resident_memory_bytes"]
        #expect(resident > 1_000_000 && after["process_virtual_memory_bytes"] >= resident)
        #expect(after["process_open_fds"] >= 3 && after["process_max_fds"] >= after["process_open_fds"])
        #expect(after["process_threads"] >= 2 && after["process_cpu_seconds_total"] > 0)
        let now = Date().timeIntervalSince1970
        #expect(after["process_start_time_seconds"] > now - 86_400 && after["process_start_time_seconds"] <= now + 1)
        for family in ["process_cpu_seconds_total counter", "process_resident_memory_bytes gauge", "rtm_requests_refused_total counter"] {
            #expect(after.text.contains("# TYPE \(family)\n"), "\(family)")
        }
        try await client.channel.close()
    }

    @Test("/proc/self/stat and /proc/self/limits read as proc(5) lays them out (a command name with spaces and parentheses)")
    func procFilesParsed() {
        let stat = "4242 (rtm (serve) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 123456 987654321 2500 18446744073709551615"
        let parsed = ProcessMetrics.parseStat(stat, ticksPerSecond: 100, pageSize: 4096)
        #expect(parsed?.cpuSeconds == 3.0 && parsed?.threads == 7 && parsed?.startTicks == 123_456)
        #expect(parsed?.virtualBytes == 987_654_321 && parsed?.residentBytes == 2500 * 4096)
        #expect(ProcessMetrics.parseStat("garbage", ticksPerSecond: 100, pageSize: 4096) == nil)
        let limits = """
            Limit                     Soft Limit           Hard Limit           Units
            Max processes             63455                63455                processes
            Max open files            1048576              1048576              files
            """
        #expect(ProcessMetrics.parseMaxFDs(limits) == 1_048_576)
        #expect(ProcessMetrics.parseMaxFDs("Max processes 1 1") == nil)
    }

    @Test("Metric values move as traffic flows (connections, logins, messages in/out by kind, bytes, deliveries, request durations, store commits, disconnects)")
    func valuesMoveWithTraffic() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        _ = try await alice.subscribe("room")
        _ = try await bob.subscribe("room")
        let before = try await Self.scrape(harness.port)
        #expect(before.text.contains("# TYPE rtm_messages_received_total counter"))
        #expect(before["rtm_connections{kind=\"message\"}"] == 2)
        #expect(before["rtm_connections{kind=\"stream\"}"] == 0)
        #expect(before["rtm_pcu"] == 2)
        #expect(before["rtm_sessions"] == 2)
        #expect(before["rtm_logins_total{result=\"ok\"}"] == 2)
        #expect(before["rtm_draining"] == 0)

        for i in 0..<5 { _ = try await alice.publish(channel: "room", message: "hello \(i)") }
        _ = try await alice.publish(toUser: "bob", message: "psst")
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "psst" } != nil)
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "hello 4" } != nil)
        let mallory = try RTMClient(config: Harness.clientConfig("mallory", port: harness.port))
        await #expect(throws: RTMError.self) { try await mallory.login(token: "006notatoken") }
        await bob.logout()
        #expect(await StreamTests.eventually { harness.server.connectionCounters.message == 1 })

        let after = try await Self.scrape(harness.port)
        func delta(_ key: String) -> Double { after[key] - before[key] }
        #expect(delta("rtm_messages_received_total{kind=\"channel\"}") == 5)
        #expect(delta("rtm_messages_sent_total{kind=\"channel\"}") == 10)   // two subscribers (alice gets her own)
        #expect(delta("rtm_deliveries_total") >= 2)   // batches: at least one frame to each subscriber
        #expect(delta("rtm_messages_received_total{kind=\"user\"}") == 1)
        #expect(delta("rtm_messages_sent_total{kind=\"user\"}") == 1)
        #expect(delta("rtm_received_bytes_total") > 5 * 7)
        #expect(delta("rtm_sent_bytes_total") > 10 * 7)
        #expect(after["rtm_request_duration_seconds_count{type=\"subscribe\"}"] == 2)
        #expect(delta("rtm_request_duration_seconds_count{type=\"publish\"}") >= 1)
        #expect(after["rtm_request_duration_seconds_count{type=\"login\"}"] >= 3)
        #expect(after["rtm_user_message_store_commit_seconds_count"] >= 1)
        #expect(after["rtm_user_message_store_commits_total"] >= 1)
        #expect(delta("rtm_logins_total{result=\"rejected\"}") == 1)
        let rejections = after.values.filter { $0.key.hasPrefix("rtm_login_rejections_total{code=") }
        #expect(rejections.values.reduce(0, +) == 1, "\(rejections)")
        #expect(delta("rtm_disconnects_total{reason=\"server_close_1000\"}") == 1)   // bob's logout
        #expect(after["rtm_connections{kind=\"message\"}"] == 1)
        #expect(after["rtm_queue_depth{queue=\"user_message_store\"}"] == 0)
        #expect(after.values["rtm_queue_depth{queue=\"storage\"}"] == 0)
        await alice.logout()
    }

    @Test("Topic messages on STREAM connections count as messages of kind stream, in and out")
    func streamMessagesCounted() async throws {
        let harness = try await Harness.start()
        let (alice, _) = try await Harness.client("alice", port: harness.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        let game = try alice.createStreamChannel("game")
        try await game.join()
        try await game.joinTopic("moves", options: JoinTopicOptions(meta: "white"))
        let bobGame = try bob.createStreamChannel("game")
        try await bobGame.join()
        _ = try await bobGame.subscribeTopic("moves")
        let before = try await Self.scrape(harness.port)
        #expect(before["rtm_connections{kind=\"stream\"}"] == 2)
        for move in ["e4", "d4", "c4"] { try await game.publishTopicMessage(topic: "moves", message: move) }
        #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "c4" } != nil)
        let after = try await Self.scrape(harness.port)
        #expect(after["rtm_messages_received_total{kind=\"stream\"}"] - before["rtm_messages_received_total{kind=\"stream\"}"] == 3)
        #expect(after["rtm_messages_sent_total{kind=\"stream\"}"] - before["rtm_messages_sent_total{kind=\"stream\"}"] == 3)
        #expect(after["rtm_request_duration_seconds_count{type=\"publishTopic\"}"] == 3)
        await alice.logout()
        await bob.logout()
    }

    @Test("M-2: a subscription from a position of an unknown epoch counts a replay with a gap")
    func replayAndGapCounted() async throws {
        let harness = try await Harness.start()
        let peer = try await RawPeer.connect(port: harness.port)
        try await peer.write(RawPeer.upgradeRequest())
        let login = #"{"type":"login","id":1,"appId":"\#(Harness.appId)","userId":"carol","token":"\#(Harness.token("carol"))"}"#
        try await peer.write(RawPeer.text(login))
        try await peer.write(RawPeer.text(#"{"type":"subscribe","id":2,"channel":"room","positions":{"room":{"epoch":"gone","seq":7}}}"#))
        #expect(await StreamTests.eventually { peer.frames().contains { $0.text.contains(#""type":"gap""#) } })
        let scrape = try await Self.scrape(harness.port)
        #expect(scrape["rtm_replays_total"] == 1)
        #expect(scrape["rtm_gaps_total"] == 1)
        await peer.close()
        #expect(await StreamTests.eventually { harness.server.connectionCount == 0 })
        let closed = try await Self.scrape(harness.port)
        #expect(closed["rtm_disconnects_total{reason=\"connection_lost\"}"] == 1)
    }
}
