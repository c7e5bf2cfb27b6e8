import Foundation
import NIOCore
import RTMAuth
import RTMProtocol
import Testing
@testable import RTMServer

/// The authorization hook's parts as values, time passed in: the circuit breaker, the
/// decision cache, how an answer is read, and the namespace options that ask the hook.
struct AuthorizationHookValueTests {
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test("the breaker opens after N failures in a row, lets one trial through after its time, and closes on its success")
    func breakerCycle() {
        var breaker = HookBreaker(threshold: 3, openFor: .seconds(10))
        let r1 = breaker.admit(now: Self.t0)
        #expect(r1)
        let r2 = breaker.failed(now: Self.t0)
        #expect(r2 == nil)
        let r3 = breaker.failed(now: Self.t0)
        #expect(r3 == nil)
        // A success in between starts the count again.
        let r4 = breaker.succeeded()
        #expect(r4 == nil)
        let r5 = breaker.failed(now: Self.t0)
        #expect(r5 == nil)
        let r6 = breaker.failed(now: Self.t0)
        #expect(r6 == nil)
        let r7 = breaker.failed(now: Self.t0)
        #expect(r7 == .opened)
        #expect(breaker.isOpen)
        let r8 = breaker.admit(now: Self.t0 + .seconds(9))
        #expect(!r8)
        // After its time: one trial, and no second request while it is under way.
        let r9 = breaker.admit(now: Self.t0 + .seconds(10))
        #expect(r9)
        let r10 = breaker.admit(now: Self.t0 + .seconds(10))
        #expect(!r10)
        let r11 = breaker.succeeded()
        #expect(r11 == .closed)
        #expect(!breaker.isOpen)
        let r12 = breaker.admit(now: Self.t0 + .seconds(10))
        #expect(r12)
    }

    @Test("a failed trial opens the breaker for another full period")
    func breakerTrialFails() {
        var breaker = HookBreaker(threshold: 1, openFor: .seconds(5))
        let r13 = breaker.failed(now: Self.t0)
        #expect(r13 == .opened)
        let r14 = breaker.admit(now: Self.t0 + .seconds(5))
        #expect(r14)
        let r15 = breaker.failed(now: Self.t0 + .seconds(5))
        #expect(r15 == nil)
        let r16 = breaker.admit(now: Self.t0 + .seconds(9))
        #expect(!r16)
        let r17 = breaker.admit(now: Self.t0 + .seconds(10))
        #expect(r17)
    }

    static func key(_ user: String, _ channel: String? = "room.a") -> HookDecisionCache.Key {
        HookDecisionCache.Key(event: .subscribe, appId: "app", userId: user, channel: channel)
    }

    @Test("a kept decision answers until it expires; past the capacity the oldest goes first")
    func cache() {
        var cache = HookDecisionCache(capacity: 2)
        cache.keep(.allow(nil), for: Self.key("a"), until: Self.t0 + .seconds(10))
        #expect(cache.verdict(for: Self.key("a"), now: Self.t0 + .seconds(9)) == .allow(nil))
        #expect(cache.verdict(for: Self.key("a"), now: Self.t0 + .seconds(10)) == nil)
        #expect(cache.verdict(for: Self.key("a", "room.b"), now: Self.t0) == nil)
        let denied = HookVerdict.deny(RequestRefusal(code: .notPermitted, reason: "no"))
        cache.keep(denied, for: Self.key("b"), until: Self.t0 + .seconds(10))
        cache.keep(.allow(nil), for: Self.key("c"), until: Self.t0 + .seconds(10))
        #expect(cache.count == 2)
        #expect(cache.verdict(for: Self.key("a"), now: Self.t0) == nil)
        #expect(cache.verdict(for: Self.key("b"), now: Self.t0) == denied)
        cache.dropExpired(now: Self.t0 + .seconds(11))
        #expect(cache.count == 0)
        var none = HookDecisionCache(capacity: 0)
        none.keep(.allow(nil), for: Self.key("a"), until: Self.t0 + .seconds(10))
        #expect(none.verdict(for: Self.key("a"), now: Self.t0) == nil)
    }

    @Test("slots: N questions at the backend at once, the rest wait in order; a freed slot goes to the oldest within its time, older ones are given up; past the queue's size a question is refused")
    func slots() {
        var slots = HookSlots<String>(capacity: 2, maxWaiting: 2)
        #expect(slots.admit("a", now: Self.t0) == .go)
        #expect(slots.admit("b", now: Self.t0) == .go)
        #expect(slots.admit("c", now: Self.t0) == .wait)
        #expect(slots.admit("d", now: Self.t0 + .milliseconds(900)) == .wait)
        #expect(slots.admit("e", now: Self.t0) == .full)
        // 1.2 s later with a 1 s limit: c waited too long, d (300 ms) takes the slot.
        let freed = slots.done(now: Self.t0 + .milliseconds(1200), maxWait: .seconds(1))
        #expect(freed.start?.0 == "d" && freed.start?.waited == .milliseconds(300))
        #expect(freed.expired == ["c"])
        #expect(slots.inFlight == 2 && slots.waitingCount == 0)
        let idle = slots.done(now: Self.t0 + .seconds(2), maxWait: .seconds(1))
        #expect(idle.start == nil && idle.expired.isEmpty && slots.inFlight == 1)
        // A free slot while others wait is not taken out of turn.
        var busy = HookSlots<String>(capacity: 1, maxWaiting: 5)
        #expect(busy.admit("x", now: Self.t0) == .go)
        #expect(busy.admit("y", now: Self.t0) == .wait)
        _ = busy.done(now: Self.t0, maxWait: .seconds(1))   // y takes it
        #expect(busy.admit("z", now: Self.t0) == .wait)
    }

    static let subscribe = HookQuestion(event: .subscribe, appId: "app", userId: "alice", channel: "room.a", channelType: "message")
    static let publish = HookQuestion(event: .publish, appId: "app", userId: "alice", channel: "room.a", channelType: "message",
                                      publish: .init(payload: ByteBuffer(string: "hi"), isText: true, customType: nil))
    static let connect = HookQuestion(event: .connect, appId: "app", userId: "alice")

    static func read(_ json: String, _ question: HookQuestion) -> Result<HookAnswer.Decision, HookFailure> {
        HookAnswer.read(ByteBuffer(string: json), question: question)
    }

    @Test("answers: allow, deny with the backend's reason (-10104), cacheSeconds, a login's grants, a publish's new payload")
    func answers() throws {
        #expect(try Self.read(#"{"result":"allow"}"#, Self.subscribe).get() == .init(verdict: .allow(nil)))
        let denied = try Self.read(#"{"result":"deny","reason":"banned here","cacheSeconds":0}"#, Self.subscribe).get()
        guard case .deny(let refusal) = denied.verdict else { Issue.record("not a deny"); return }
        #expect(refusal.code == .notPermitted)
        #expect(refusal.reason.contains("banned here") && refusal.reason.contains("room.a"))
        #expect(denied.cacheSeconds == 0)
        let grants = try Self.read(#"{"result":"allow","capability":{"channels":{"room.*":["subscribe"]}}}"#, Self.connect).get()
        #expect(grants.verdict == .allow(HookRewrite(capabilities: Capabilities(channels: ["room.*": [.subscribe]]))))
        let text = try Self.read(#"{"result":"allow","payload":"***"}"#, Self.publish).get()
        #expect(text.verdict == .allow(HookRewrite(payload: ByteBuffer(string: "***"))))
        let bytes = try Self.read(#"{"result":"allow","payloadBase64":"AAE="}"#, Self.publish).get()
        #expect(bytes.verdict == .allow(HookRewrite(payload: ByteBuffer(bytes: [0, 1]), payloadIsText: false)))
    }

    @Test("an answer that is not a decision is a failure, named")
    func badAnswers() {
        for (json, question, words) in [
            ("not json", Self.subscribe, "not a JSON object"),
            (#"{"result":"maybe"}"#, Self.subscribe, "allow"),
            (#"{"result":"allow","payload":"x"}"#, Self.subscribe, "only answer a publish"),
            (#"{"result":"allow","capability":{"channels":{"room.*":["fly"]}}}"#, Self.connect, "capability"),
            (#"{"result":"allow","capability":{}}"#, Self.subscribe, "only answer a connect"),
            (#"{"result":"allow","payloadBase64":"%%%"}"#, Self.publish, "base64"),
        ] {
            guard case .failure(let failure) = Self.read(json, question) else { Issue.record("\(json) accepted"); continue }
            #expect(failure.description.contains(words), "\(json): \(failure)")
        }
    }

    @Test("the question's body: event, user, channel, and a publish's size, type and payload")
    func body() throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Self.publish.body(now: 42)) as? [String: Any])
        #expect(object["event"] as? String == "publish")
        #expect(object["userId"] as? String == "alice")
        #expect(object["channel"] as? String == "room.a")
        #expect(object["payloadSize"] as? Int == 2)
        #expect(object["payloadType"] as? String == "string")
        #expect(object["payload"] as? String == "hi")
        #expect(object["ts"] as? Int == 42)
        let failed = Self.subscribe.unanswered("HTTP 500")
        #expect(failed.code == .notPermitted && failed.reason.contains("HTTP 500") && failed.reason.contains("fails closed"))
    }

    @Test("namespace options hook-subscribe, hook-publish, hook-fail-open")
    func namespaceOptions() throws {
        let namespaces = [try ChannelNamespace(parsing: "room.*:hook-subscribe,hook-publish,hook-fail-open"),
                          try ChannelNamespace(parsing: "vip.*:hook-subscribe")]
        #expect(namespaces.hook(.subscribe, on: "room.a") == .open)
        #expect(namespaces.hook(.publish, on: "room.a") == .open)
        #expect(namespaces.hook(.subscribe, on: "vip.a") == .closed)
        #expect(namespaces.hook(.publish, on: "vip.a") == nil)
        #expect(namespaces.hook(.subscribe, on: "lobby") == nil)
    }
}
