import NIOCore
import RTMProtocol
import Testing
@testable import RTMServer

/// Who watches whom, as a pure value (AGORA_REFERENCE §1.7).
struct PeerStatusRegistryTests {
    static let alice = UserKey(appId: "app", userId: "alice")
    static let bob = UserKey(appId: "app", userId: "bob")
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func registry(_ configure: (inout ServerConfiguration) -> Void = { _ in }) -> PeerStatusRegistry {
        var config = ServerConfiguration()
        configure(&config)
        return PeerStatusRegistry(configuration: config)
    }

    @Test("§1.7: a subscribe reports the states now; a change is told once to each watcher, with a rising version")
    func subscribeAndUpdate() throws {
        var registry = Self.registry()
        let peers = try registry.subscribe(Self.alice, session: 1, targets: ["bob", "carol", "bob"]) { $0.userId == "bob" ? .online : .offline }.get()
        #expect(peers == [PeerOnlineStatus(userId: "bob", state: .online), PeerOnlineStatus(userId: "carol", state: .offline)])
        let unchanged = registry.update(Self.bob, to: .online)
        #expect(unchanged.isEmpty)
        let notices = registry.update(Self.bob, to: .unreachable)
        #expect(notices.map(\.watcher) == [Self.alice])
        #expect(notices.first?.peers == [PeerOnlineStatus(userId: "bob", state: .unreachable)])
        let first = try #require(notices.first?.version)
        let again = registry.update(Self.bob, to: .unreachable)
        #expect(again.isEmpty)
        let back = registry.update(Self.bob, to: .online)
        #expect(try #require(back.first?.version) > first)
        registry.unsubscribe(Self.alice, targets: ["bob"])
        let unwatched = registry.update(Self.bob, to: .offline)
        #expect(unwatched.isEmpty)
        #expect(registry.targets(of: Self.alice) == ["carol"])
    }

    @Test("§1.7: at most maxSubscribed peers (re-subscribing counts once); subscriptions follow the session and end with it")
    func limitAndSession() throws {
        var registry = Self.registry { $0.peerStatusMaxSubscribed = 2 }
        _ = try registry.subscribe(Self.alice, session: 1, targets: ["bob", "carol"]) { _ in .online }.get()
        _ = try registry.subscribe(Self.alice, session: 1, targets: ["bob"]) { _ in .online }.get()
        guard case .failure(let refusal) = registry.subscribe(Self.alice, session: 1, targets: ["dave"], state: { _ in .online }) else {
            Issue.record("a third peer was accepted")
            return
        }
        #expect(refusal.code == .peerSubscriptionOverflow)
        // A new session of alice (a kick, or a login after its grace window) starts empty.
        registry.sessionChanged(Self.alice, session: 2)
        #expect(registry.targets(of: Self.alice).isEmpty)
        let dropped = registry.update(Self.bob, to: .offline)
        #expect(dropped.isEmpty)
        _ = try registry.subscribe(Self.alice, session: 2, targets: ["dave"]) { _ in .online }.get()
        registry.sessionChanged(Self.alice, session: nil)
        #expect(registry.targets(of: Self.alice).isEmpty)
    }

    @Test("§1.7: 10 calls per 5 s per user and kind; users per call; silence marks")
    func rateAndChecks() {
        var registry = Self.registry()
        var allowed: [Bool] = []
        for _ in 0..<11 { allowed.append(registry.allow(Self.alice, .query, now: Self.t0)) }
        #expect(allowed == Array(repeating: true, count: 10) + [false])
        let subscribe = registry.allow(Self.alice, .subscription, now: Self.t0)   // its own bucket
        let later = registry.allow(Self.alice, .query, now: Self.t0 + .milliseconds(500))   // 2 per second
        #expect(subscribe && later)
        let counts = [registry.allow(Self.alice, .memberCount, now: Self.t0), registry.allow(Self.alice, .memberCount, now: Self.t0),
                      registry.allow(Self.alice, .memberCount, now: Self.t0 + .seconds(1))]
        #expect(counts == [true, false, true])   // getChannelMemberCount: 1 per second
        #expect(registry.check([], limits: Limits())?.code == .invalidParameter)
        #expect(registry.check((0...256).map { "u\($0)" }, limits: Limits())?.code == .invalidParameter)
        #expect(registry.check(["null"], limits: Limits())?.code == .invalidUserId)
        #expect(registry.check(["bob"], limits: Limits()) == nil)
        let marks = [registry.setSilent(Self.bob, true), registry.setSilent(Self.bob, true), registry.setSilent(Self.bob, false)]
        #expect(marks == [true, false, true])
    }

    @Test("§1.7/H-2: the unreachable threshold is 6 s, or 1.2 heartbeat intervals when that is longer")
    func threshold() {
        #expect(ServerConfiguration().peerUnreachableAfter == .seconds(6))
        #expect(Hub.unreachableThreshold(configured: .seconds(6), heartbeat: .seconds(5)) == .seconds(6))
        #expect(Hub.unreachableThreshold(configured: .seconds(6), heartbeat: .seconds(30)) == .seconds(36))
    }
}
