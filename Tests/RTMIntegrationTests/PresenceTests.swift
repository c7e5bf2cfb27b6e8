import Foundation
import RTMProtocol
import RTMServer
import RTMTestSupport
import Testing
@testable import RTMClient

/// Presence end to end (SPEC P-1…P-4, AGORA_REFERENCE §2.10).
@Suite(.realTime, .serialized)
struct PresenceTests {
    static func presence(_ user: String, _ kinds: Set<PresenceEventKind>) -> @Sendable (RTMEvent) -> Bool {
        { $0.presenceEvent.map { $0.userId == user && kinds.contains($0.kind) } ?? false }
    }

    @Test("P-1: a member cut for less than the grace window keeps its state and is never seen leaving")
    func shortCutKeepsState() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        try await alice.subscribe("room")
        try await alice.setState(channel: "room", ["mood": "busy"])
        #expect(await bobEvents.first(within: soon, where: Self.presence("alice", [.remoteStateChanged]))?.presenceEvent?.state == ["mood": "busy"])
        await bobEvents.clear()
        let mark = await aliceEvents.mark()
        proxy.cutAll()
        #expect(await aliceEvents.first(since: mark, within: soon) { $0.link?.operation == .reconnected } != nil)
        #expect(try await bob.getState(channel: "room", userId: "alice") == ["mood": "busy"])
        #expect(await bobEvents.next(within: .milliseconds(1200), where: Self.presence("alice", Set(PresenceEventKind.allCases))) == nil)
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("P-2/P-3: cut past the grace window: timeout and state cleared; on return a join, then the cached state re-applied")
    func longCutRejoinsWithState() async throws {
        let harness = try await Harness.start()
        let proxy = try await FaultProxy.scoped(targetPort: harness.port)
        let (alice, aliceEvents) = try await Harness.client("alice", port: proxy.port)
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        try await alice.setState(channel: "room", ["role": "host"])   // cached before subscribing
        try await alice.subscribe("room")
        #expect(await bobEvents.first(within: soon, where: Self.presence("alice", [.remoteStateChanged])) != nil)
        proxy.setRefuseNew(true)
        proxy.cutAll()
        #expect(await bobEvents.first(within: soon, where: Self.presence("alice", [.remoteTimeout])) != nil)
        do {
            _ = try await bob.getState(channel: "room", userId: "alice")
            Issue.record("a timed-out member still has state")
        } catch {
            #expect(error.code == .presenceUserNotExist)
        }
        await bobEvents.clear()
        proxy.setRefuseNew(false)
        #expect(await aliceEvents.first(within: soon) { $0.link?.operation == .reconnected } != nil)
        let join = await bobEvents.first(within: soon, where: Self.presence("alice", [.remoteJoin]))
        let state = await bobEvents.first(within: soon, where: Self.presence("alice", [.remoteStateChanged]))
        #expect(join != nil)
        #expect(state?.presenceEvent?.state == ["role": "host"])
        let order = await bobEvents.matching(Self.presence("alice", [.remoteJoin, .remoteStateChanged])).compactMap { $0.presenceEvent?.kind }
        #expect(order == [.remoteJoin, .remoteStateChanged])
        #expect(try await bob.getState(channel: "room", userId: "alice") == ["role": "host"])
        await alice.logout()
        await bob.logout()
        try? await proxy.stop()
    }

    @Test("Presence API: snapshot with states, whoNow paging, whereNow, getState, removeState, limits, classic member events")
    func presenceAPI() async throws {
        let harness = try await Harness.start()
        let (alice, aliceEvents) = try await Harness.client("alice", port: harness.port)
        try await alice.subscribe("room")
        try await alice.subscribe("lobby")
        try await alice.setState(channel: "room", ["a": "1", "b": "2"])
        let (bob, bobEvents) = try await Harness.client("bob", port: harness.port)
        try await bob.subscribe("room")
        let snapshot = await bobEvents.first(within: soon) { $0.presenceEvent?.kind == .snapshot }
        #expect(snapshot?.presenceEvent?.members == ["alice", "bob"])
        #expect(snapshot?.presenceEvent?.states == ["alice": ["a": "1", "b": "2"]])
        #expect(try await bob.whereNow(userId: "alice") == ["lobby", "room"])
        try await alice.removeState(channel: "room", keys: ["a"])
        #expect(try await bob.getState(channel: "room", userId: "alice") == ["b": "2"])
        // Classic view for alice: bob joined, count 2.
        #expect(await aliceEvents.first(within: soon) { $0.memberEvent == .joined(channel: "room", userId: "bob") } != nil)
        #expect(await aliceEvents.first(within: soon) { $0.memberEvent == .count(channel: "room", count: 2) } != nil)
        // Limits: 33 pairs is a typed error, and nothing is changed.
        let big = Dictionary(uniqueKeysWithValues: (0..<33).map { ("k\($0)", "v") })
        do { try await alice.setState(channel: "room", big); Issue.record("33 pairs accepted") } catch { #expect(error.code == .presenceStateCountOverflow) }
        // whoNow pages of 100.
        var crowd: [RTMClient] = []
        try await withThrowingTaskGroup(of: RTMClient.self) { group in
            for i in 0..<120 {
                group.addTask {
                    let (client, _) = try await Harness.client(String(format: "u%03d", i), port: harness.port) { $0.heartbeatInterval = 2; $0.pongTimeout = 5 }
                    try await client.subscribe("room")
                    return client
                }
            }
            for try await client in group { crowd.append(client) }
        }
        let first = try await bob.whoNow(channel: "room", includeState: true)
        #expect(first.users.count == 100)
        #expect(first.totalCount == 122)
        let next = try #require(first.nextPage)
        let second = try await bob.whoNow(channel: "room", page: next)
        #expect(second.nextPage == nil)
        #expect(Set(first.users + second.users).count == 122)
        // A cursor we never gave (not a user id) is refused, naming it; a member's id that has
        // left still pages on after it.
        do {
            _ = try await bob.whoNow(channel: "room", page: "bad/cursor")
            Issue.record("a page that is no user id was accepted")
        } catch {
            #expect(error.code == .invalidParameter && error.reason.contains("page"), "\(error)")
        }
        #expect(try await bob.whoNow(channel: "room", page: "zz").users.isEmpty)
        #expect(first.states["alice"] == ["b": "2"])
        // A big channel's subscribe snapshot lists the first page only, with the full count.
        let (late, lateEvents) = try await Harness.client("zz-late", port: harness.port)
        let listed = try await late.subscribe("room")
        #expect(listed.count == 100)
        let lateSnapshot = await lateEvents.first(within: soon) { $0.presenceEvent?.kind == .snapshot }
        #expect(lateSnapshot?.presenceEvent?.memberCount == 123)
        #expect(lateSnapshot?.presenceEvent?.members == first.users)
        await late.logout()
        await withTaskGroup(of: Void.self) { group in for client in crowd { group.addTask { await client.logout() } } }
        await alice.logout()
        await bob.logout()
    }

    @Test("Quiet members are invisible; withPresence false receives no presence events")
    func quietAndNoPresence() async throws {
        let harness = try await Harness.start()
        let (watcher, watcherEvents) = try await Harness.client("watcher", port: harness.port)
        try await watcher.subscribe("room")
        let (ghost, _) = try await Harness.client("ghost", port: harness.port)
        try await ghost.subscribe("room", options: SubscribeOptions(beQuiet: true))
        let (deaf, deafEvents) = try await Harness.client("deaf", port: harness.port)
        try await deaf.subscribe("room", options: SubscribeOptions(withPresence: false))
        let (late, _) = try await Harness.client("late", port: harness.port)
        try await late.subscribe("room")
        _ = await watcherEvents.first(within: soon, where: Self.presence("late", [.remoteJoin]))
        #expect(await watcherEvents.matching(Self.presence("ghost", Set(PresenceEventKind.allCases))).isEmpty)
        #expect(try await watcher.whoNow(channel: "room").users == ["deaf", "late", "watcher"])
        #expect(await deafEvents.matching { $0.presenceEvent != nil && $0.presenceEvent?.kind != .snapshot }.isEmpty)
        // Quiet members still receive messages.
        try await watcher.publish(channel: "room", message: "hi")
        for client in [ghost, deaf, late, watcher] { await client.logout() }
    }

    @Test("Interval mode: above the threshold, changes come aggregated per interval; a rejoin within the debounce cancels the leave")
    func intervalMode() async throws {
        let harness = try await Harness.start {
            $0.presenceIntervalThreshold = 3
            $0.presenceInterval = .milliseconds(300)
            $0.presenceDebounce = .milliseconds(200)
        }
        let (watcher, watcherEvents) = try await Harness.client("watcher", port: harness.port)
        try await watcher.subscribe("room")
        var others: [RTMClient] = []
        for name in ["m1", "m2", "m3", "m4", "m5"] {
            let (client, _) = try await Harness.client(name, port: harness.port)
            try await client.subscribe("room")
            others.append(client)
        }
        try await others[0].unsubscribe("room")
        try await others[0].subscribe("room")   // leave then rejoin within the interval: nothing to report
        try await others[4].unsubscribe("room")
        let interval = await watcherEvents.first(within: soon) { $0.presenceEvent?.kind == .interval }
        let event = try #require(interval?.presenceEvent)
        // m1, m2 were announced one by one (≤ 3 members); m3 took it over the threshold.
        let individual = await watcherEvents.matching { $0.presenceEvent?.kind == .remoteJoin }.compactMap { $0.presenceEvent?.userId }
        #expect(individual == ["m1", "m2"])
        #expect(event.members == ["m3", "m4"])   // m5 joined and left within the interval
        #expect(event.left.isEmpty)
        #expect(event.memberCount == 5)
        // A leave is reported once the debounce has passed without a rejoin.
        let left = await watcherEvents.mark()
        try await others[1].unsubscribe("room")
        let later = await watcherEvents.first(since: left, within: soon) { $0.presenceEvent?.kind == .interval && $0.presenceEvent?.left.isEmpty == false }
        #expect(later?.presenceEvent?.left == ["m2"])
        for client in others { await client.logout() }
        await watcher.logout()
    }
}
