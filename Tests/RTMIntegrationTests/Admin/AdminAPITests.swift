import Foundation
import RTMAuth
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// The admin HTTP API against a real server and real SDK clients.
@Suite("Admin API", .realTime, .serialized)
struct AdminAPITests {
    @Test("admin: a missing or wrong key is refused with 401 and logged; the key is compared whole")
    func wrongKeyRefused() async throws {
        let admin = try await AdminHarness.start()
        let missing = try await admin.call("GET", "/v1/info", key: nil)
        #expect(missing.status == 401)
        #expect(missing.json["error"] as? String == "unauthorized")
        let wrong = try await admin.call("GET", "/v1/info", key: "test-admin-key-0123456788")
        #expect(wrong.status == 401)
        let prefix = try await admin.call("GET", "/v1/info", key: String(AdminHarness.key.dropLast()))
        #expect(prefix.status == 401)
        let longer = try await admin.call("POST", "/v1/publish", body: ["channel": "room", "message": "x"], key: AdminHarness.key + "x")
        #expect(longer.status == 401)
        #expect(admin.logs.contains(.warning, "admin: request refused (no admin key)"))
        #expect(admin.logs.contains(.warning, "admin: request refused (wrong admin key)"))
        #expect(admin.logs.contains(.warning, "path=/v1/publish"))
        #expect(try await admin.call("GET", "/v1/info").status == 200)
        // The console page itself needs no key (it asks for it).
        #expect(try await admin.call("GET", "/console", key: nil).status == 200)
    }

    @Test("admin: no key configured, no admin listener")
    func disabledWithoutKey() async throws {
        let harness = try await Harness.start { $0.adminPort = 0 }
        #expect(harness.server.adminPort == nil)
    }

    @Test("admin: publish reaches subscribers as a channel message; send is a durable user message")
    func publishAndSend() async throws {
        let admin = try await AdminHarness.start()
        let (alice, events) = try await Harness.client("alice", port: admin.port)
        defer { Task { await alice.logout() } }
        try await alice.subscribe("room")
        let published = try await admin.call("POST", "/v1/publish", body: ["channel": "room", "message": "hello from ops", "publisher": "ops"])
        #expect(published.status == 200)
        #expect(published.json["seq"] as? Int == 1)
        let message = await events.first(within: soon) { $0.messageEvent?.channelName == "room" }
        #expect(message?.messageEvent?.text == "hello from ops")
        #expect(message?.messageEvent?.publisher == "ops")

        let sent = try await admin.call("POST", "/v1/send", body: ["user": "alice", "message": "direct", "from": "support"])
        #expect(sent.status == 200)
        #expect(sent.json["receiverOnline"] as? Bool == true)
        let direct = await events.first(within: soon) { $0.messageEvent?.channelType == .user }
        #expect(direct?.messageEvent?.text == "direct")
        #expect(direct?.messageEvent?.publisher == "support")

        // bob is offline: stored, delivered at his login (M-1).
        let waiting = try await admin.call("POST", "/v1/send", body: ["user": "bob", "message": "waiting for you"])
        #expect(waiting.json["receiverOnline"] as? Bool == false)
        let (bob, bobEvents) = try await Harness.client("bob", port: admin.port)
        defer { Task { await bob.logout() } }
        let delivered = await bobEvents.first(within: soon) { $0.messageEvent?.channelType == .user }
        #expect(delivered?.messageEvent?.text == "waiting for you")
        #expect(delivered?.messageEvent?.publisher == "admin")

        let bad = try await admin.call("POST", "/v1/publish", body: ["channel": "room"])
        #expect(bad.status == 400)
        #expect((bad.json["message"] as? String)?.contains("exactly one of 'message'") == true)
        let missing = try await admin.call("POST", "/v1/publish", body: ["message": "x"])
        #expect(missing.json["message"] as? String == "missing field 'channel'")
        // Bodies of the wrong shape are named in our words, never Foundation's.
        let wrongType = try await admin.call("POST", "/v1/publish", body: ["channel": 5, "message": "x"])
        #expect(wrongType.status == 400)
        #expect(wrongType.json["message"] as? String == "wrong type for field 'channel': expected a string")
    }

    @Test("admin disconnect: the client is told why, reconnects and resumes; the other members see nothing (P-1)")
    func disconnectResumes() async throws {
        let admin = try await AdminHarness.start()
        let (alice, aliceEvents, bob, bobEvents) = try await admin.aliceAndBob(in: "room")
        defer { Task { await alice.logout(); await bob.logout() } }
        let mark = await bobEvents.mark()
        let answer = try await admin.call("POST", "/v1/disconnect", body: ["user": "alice", "reason": "maintenance on your node"])
        #expect(answer.json["disconnected"] as? Bool == true)
        let lost = await aliceEvents.first(within: soon) { $0.link?.currentState == .disconnected }
        #expect(lost?.link?.reason.contains("maintenance on your node") == true)
        let back = await aliceEvents.first(within: soon) { $0.link?.currentState == .connected && $0.link?.isResumed == true }
        #expect(back != nil)
        _ = try await bob.publish(channel: "room", message: "still here?")
        #expect(await aliceEvents.first(within: soon) { $0.messageEvent?.text == "still here?" } != nil)
        let presence = await bobEvents.matching { _ in true }.dropFirst(mark).compactMap(\.presenceEvent)
        #expect(presence.allSatisfy { $0.userId != "alice" }, "bob saw \(presence)")
        let nobody = try await admin.call("POST", "/v1/disconnect", body: ["user": "nobody"])
        #expect(nobody.json["disconnected"] as? Bool == false)
    }

    @Test("admin sessions show each online connection like NATS connz: address, node, since, idle, messages and bytes each way, backlog, User-Agent")
    func sessionConnections() async throws {
        let admin = try await AdminHarness.start()
        let (alice, _) = try await Harness.client("alice", port: admin.port)
        let (bob, _) = try await Harness.client("bob", port: admin.port)
        defer { Task { await alice.logout(); await bob.logout() } }
        try await bob.subscribe("room")
        for index in 0..<5 { _ = try await alice.publish(channel: "room", message: "message \(index)") }
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        // Bob has had the five (the publishes were acknowledged after the fan-out's writes).
        let answer = try await admin.call("GET", "/v1/sessions")
        let sessions = try #require(answer.json["sessions"] as? [[String: Any]])
        func connection(_ user: String) throws -> [String: Any] {
            try #require(sessions.first { $0["userId"] as? String == user }?["connection"] as? [String: Any], "\(user): \(sessions)")
        }
        let a = try connection("alice"), b = try connection("bob")
        for c in [a, b] {
            #expect(c["address"] as? String == "127.0.0.1")
            #expect((c["node"] as? String)?.isEmpty == false)
            #expect((c["connectedAt"] as? Int64).map { $0 <= before && $0 > before - 60_000 } == true)
            #expect((c["idleMs"] as? Int).map { $0 >= 0 && $0 < 30_000 } == true)
            #expect(c["userAgent"] as? String == RTMVersion.userAgent)
            #expect((c["pendingBytes"] as? Int).map { $0 >= 0 } == true)
        }
        // Alice: login + 5 publishes in (at least), their acknowledgements out; bob: login and
        // subscribe in, the five messages out (and their bytes).
        #expect((a["messagesIn"] as? Int ?? 0) >= 6 && (a["bytesIn"] as? Int ?? 0) > 5 * 9)
        #expect((a["messagesOut"] as? Int ?? 0) >= 6)
        #expect((b["messagesIn"] as? Int ?? 0) >= 2)
        #expect((b["messagesOut"] as? Int ?? 0) >= 7 && (b["bytesOut"] as? Int ?? 0) > 5 * 9)
        // Leaving the channel keeps what it was sent there.
        try await bob.unsubscribe("room")
        let after = try await admin.call("GET", "/v1/sessions")
        let bobAfter = (after.json["sessions"] as? [[String: Any]])?.first { $0["userId"] as? String == "bob" }?["connection"] as? [String: Any]
        #expect((bobAfter?["messagesOut"] as? Int ?? 0) >= (b["messagesOut"] as? Int ?? 0))
        #expect((bobAfter?["bytesOut"] as? Int ?? 0) >= (b["bytesOut"] as? Int ?? 0))
    }

    @Test("admin listings page: /v1/sessions and /v1/channels take limit and page, answer total and nextPage until the last page, and refuse a bad limit or cursor with 400")
    func listingsPage() async throws {
        let admin = try await AdminHarness.start()
        var clients: [RTMClient] = []
        for user in ["carol", "alice", "erin", "bob", "dave"] {
            let (client, _) = try await Harness.client(user, port: admin.port)
            try await client.subscribe("room-\(user)")
            clients.append(client)
        }
        let everyone = clients
        defer { Task { for client in everyone { await client.logout() } } }
        var users: [String] = []
        var page: String?
        var pages = 0
        repeat {
            let answer = try await admin.call("GET", "/v1/sessions?limit=2" + (page.map { "&page=\($0)" } ?? ""))
            #expect(answer.status == 200)
            #expect(answer.json["total"] as? Int == 5)
            users += (answer.json["sessions"] as? [[String: Any]] ?? []).compactMap { $0["userId"] as? String }
            page = answer.json["nextPage"] as? String
            pages += 1
        } while page != nil && pages < 10
        #expect(users == ["alice", "bob", "carol", "dave", "erin"])
        #expect(pages == 3)
        let channels = try await admin.call("GET", "/v1/channels?limit=4")
        #expect((channels.json["channels"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["room-alice", "room-bob", "room-carol", "room-dave"])
        #expect(channels.json["total"] as? Int == 5)
        let rest = try await admin.call("GET", "/v1/channels?page=\(try #require(channels.json["nextPage"] as? String))")
        #expect((rest.json["channels"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["room-erin"])
        #expect(rest.json["nextPage"] == nil)
        let all = try await admin.call("GET", "/v1/sessions")
        #expect((all.json["sessions"] as? [Any])?.count == 5 && all.json["nextPage"] == nil)
        for bad in ["limit=0", "limit=1001", "limit=x", "page=abcde", "page=0"] {
            let refused = try await admin.call("GET", "/v1/sessions?\(bad)")
            #expect(refused.status == 400, "\(bad)")
            #expect((refused.json["message"] as? String)?.isEmpty == false, "\(bad): \(refused.json)")
        }
    }

    @Test("admin kick: the session ends with kickedOutByServer and the reason; members see the leave; no automatic login (C-6)")
    func kickEndsSession() async throws {
        let admin = try await AdminHarness.start()
        let (alice, aliceEvents, bob, bobEvents) = try await admin.aliceAndBob(in: "room")
        defer { Task { await alice.logout(); await bob.logout() } }
        let kicked = try await admin.call("POST", "/v1/kick", body: ["user": "alice", "reason": "spamming"])
        #expect(kicked.json["sessionEnded"] as? Bool == true)
        let failed = await aliceEvents.first(within: soon) { $0.link?.currentState == .failed }
        #expect(failed?.link?.reasonCode == .kickedOutByServer)
        #expect(failed?.link?.reason == "spamming")
        #expect(await aliceEvents.first(within: soon) { $0.classic == .aborted } != nil)
        let left = await bobEvents.first(within: soon) { $0.presenceEvent?.kind == .remoteLeave && $0.presenceEvent?.userId == "alice" }
        #expect(left != nil)
        #expect(admin.harness.server.members(appId: Harness.appId, channel: "room") == ["bob"])
        // Never back by itself: the session stays gone (a window in which nothing may happen).
        try await Task.sleep(for: .milliseconds(500))   // the window of the negative rule: no comeback in it
        #expect(admin.harness.server.members(appId: Harness.appId, channel: "room") == ["bob"])
        let sessions = try await admin.call("GET", "/v1/sessions")
        #expect((sessions.json["sessions"] as? [[String: Any]])?.compactMap { $0["userId"] as? String } == ["bob"])
    }

    @Test("admin ban: logins are refused with -10012 naming the ban until it ends, then admitted")
    func banRefusesLogin() async throws {
        let admin = try await AdminHarness.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: admin.port)
        defer { Task { await alice.logout() } }
        let banned = try await admin.call("POST", "/v1/ban", body: ["user": "alice", "seconds": 1.0, "reason": "cooling off"])
        #expect(banned.json["sessionEnded"] as? Bool == true)
        #expect(banned.json["bannedUntil"] is Int)
        let failed = await aliceEvents.first(within: soon) { $0.link?.currentState == .failed }
        #expect(failed?.link?.reason == "banned: cooling off")
        let bans = try await admin.call("GET", "/v1/bans")
        #expect((bans.json["bans"] as? [[String: Any]])?.first?["user"] as? String == "alice")

        let (again, _) = try await Harness.client("alice", port: admin.port, login: false)
        defer { Task { await again.logout() } }
        do {
            try await again.login(token: Harness.token("alice"))
            Issue.record("a banned user logged in")
        } catch {
            #expect(error.code == .loginRejected)
            #expect(error.reason.contains("is banned for"))
            #expect(error.reason.contains("cooling off"))
        }
        // The ban ends by itself (after its 1 s): a login is admitted again.
        let later = try await firstValue(within: soon, every: .milliseconds(100)) { () async throws -> RTMClient? in
            let (client, _) = try await Harness.client("alice", port: admin.port, login: false)
            if (try? await client.login(token: Harness.token("alice"))) != nil { return client }
            await client.logout()
            return nil
        }
        #expect(later != nil, "the ban did not end")
        defer { if let later { Task { await later.logout() } } }
        // And it can be lifted early.
        _ = try await admin.call("POST", "/v1/ban", body: ["user": "carol", "seconds": 600])
        let lifted = try await admin.call("POST", "/v1/unban", body: ["user": "carol"])
        #expect(lifted.json["unbanned"] as? Bool == true)
        let (carol, _) = try await Harness.client("carol", port: admin.port)
        await carol.logout()
    }

    @Test("admin revoke: a revoked token's session ends (invalidToken) and the token is refused (-10005); revoking a user refuses its older tokens only")
    func revokeTokens() async throws {
        let admin = try await AdminHarness.start()
        let now = UInt32(Date().timeIntervalSince1970)
        let token = AccessToken2.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: "alice", expire: 3600)
        let (alice, aliceEvents) = try await Harness.client("alice", port: admin.port, login: false)
        defer { Task { await alice.logout() } }
        try await alice.login(token: token)
        let revoked = try await admin.call("POST", "/v1/revoke", body: ["token": token])
        #expect(revoked.json["scope"] as? String == "token")
        #expect(revoked.json["sessionsEnded"] as? Int == 1)
        let failed = await aliceEvents.first(within: soon) { $0.link?.currentState == .failed }
        #expect(failed?.link?.reasonCode == .invalidToken)

        let (retry, _) = try await Harness.client("alice", port: admin.port, login: false)
        defer { Task { await retry.logout() } }
        await #expect(throws: RTMError.self) { try await retry.login(token: token) }
        let fresh = AccessToken2.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: "alice", expire: 3600, issueTs: now + 1)
        try await retry.login(token: fresh)

        // Every token of the user issued before now.
        let all = try await admin.call("POST", "/v1/revoke", body: ["user": "alice"])
        #expect(all.json["scope"] as? String == "user")
        #expect(all.json["sessionsEnded"] as? Int == 1)
        let before = try #require(all.json["before"] as? Int)
        let old = AccessToken2.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: "alice", expire: 3600,
                                            issueTs: UInt32(before) - 5)
        let (third, _) = try await Harness.client("alice", port: admin.port, login: false)
        defer { Task { await third.logout() } }
        do {
            try await third.login(token: old)
            Issue.record("a token issued before the revocation logged in")
        } catch {
            #expect(error.code == .invalidToken)
            #expect(error.reason.contains("were revoked"))
        }
        let newer = AccessToken2.buildRTMToken(appId: Harness.appId, appCertificate: Harness.certificate, userId: "alice", expire: 3600,
                                              issueTs: UInt32(before))
        try await third.login(token: newer)
    }

    @Test("admin: presence, channels, inspector, sessions, history and info reflect the server")
    func reads() async throws {
        let admin = try await AdminHarness.start()
        let (alice, _) = try await Harness.client("alice", port: admin.port)
        defer { Task { await alice.logout() } }
        try await alice.subscribe("room")
        try await alice.setState(channel: "room", ["mood": "busy"])
        _ = try await alice.publish(channel: "room", message: "one", storeInHistory: true)
        let whoNow = try await admin.call("GET", "/v1/presence/whonow?channel=room&includeState=true")
        #expect(whoNow.json["users"] as? [String] == ["alice"])
        #expect((whoNow.json["states"] as? [String: [String: String]])?["alice"] == ["mood": "busy"])
        let whereNow = try await admin.call("GET", "/v1/presence/wherenow?user=alice")
        #expect(whereNow.json["channels"] as? [String] == ["room"])
        #expect(try await admin.call("GET", "/v1/presence/wherenow?user=ghost").status == 404)
        let channels = try await admin.call("GET", "/v1/channels")
        let room = (channels.json["channels"] as? [[String: Any]])?.first { $0["name"] as? String == "room" }
        #expect(room?["members"] as? Int == 1)
        #expect(room?["lastSeq"] as? Int == 1)
        let inspected = try await admin.call("GET", "/v1/channels/room")
        #expect((inspected.json["recent"] as? [[String: Any]])?.first?["text"] as? String == "one")
        #expect(try await admin.call("GET", "/v1/channels/nowhere").status == 404)
        let history = try await waitForHistory(admin, channel: "room")
        #expect((history.json["messages"] as? [[String: Any]])?.first?["text"] as? String == "one")
        // Refusals by request type and code: one answered by the lock store (off the loop), one by the connection.
        await #expect(throws: RTMError.self) { try await alice.releaseLock(channel: "room", lockName: "none") }
        await #expect(throws: RTMError.self) { _ = try await alice.whereNow(userId: "ghost") }
        let info = try await admin.call("GET", "/v1/info")
        let refusals = (info.json["refusals"] as? [[String: Any]]) ?? []
        #expect(refusals.contains { $0["operation"] as? String == "releaseLock" && $0["name"] as? String == "lockNotExist" && $0["count"] as? Int == 1 },
                "\(refusals)")
        #expect(refusals.contains { $0["operation"] as? String == "whereNow" && $0["code"] as? Int == -13011 }, "\(refusals)")
        #expect((info.json["connections"] as? [String: Any])?["message"] as? Int == 1)
        #expect((info.json["counters"] as? [String: Any])?["channelMessages"] as? Int == 1)
        #expect(info.json["version"] as? String == "0.14.0")
    }

    /// History is written after the publish's reply: waits until it shows.
    private func waitForHistory(_ admin: AdminHarness, channel: String) async throws -> (status: Int, json: [String: Any]) {
        let query = "/v1/history?channel=\(channel)&count=10"
        let shown = try await firstValue(within: soon, every: .milliseconds(20)) {
            let page = try await admin.call("GET", query)
            return ((page.json["messages"] as? [Any]) ?? []).isEmpty ? nil : page
        }
        if let shown { return shown }
        return try await admin.call("GET", query)
    }
}
