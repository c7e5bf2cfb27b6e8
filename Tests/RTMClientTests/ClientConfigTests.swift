import Testing
@testable import RTMClient
import RTMProtocol

struct ClientConfigTests {
    @Test("§7: out-of-range values are rejected with an error naming the field and range")
    func rejectsInvalid() {
        var c = RTMClientConfig(appId: "app", userId: "alice")
        c.heartbeatInterval = 4
        #expect(throws: RTMError.self) { try c.validate() }
        do { try c.validate() } catch { #expect(error.reason.contains("heartbeatInterval") && error.reason.contains("[5, 1800]")) }
        c.heartbeatInterval = 5
        c.presenceTimeout = 301
        do { try c.validate(); Issue.record("accepted") } catch { #expect(error.reason.contains("presenceTimeout")) }
        c.presenceTimeout = 15
        c.reconnectTimeout = 10
        do { try c.validate(); Issue.record("accepted") } catch { #expect(error.reason.contains("reconnectTimeout")) }
        c.reconnectTimeout = 0
        c.userId = "bad/user"
        do { try c.validate(); Issue.record("accepted") } catch { #expect(error.code == .invalidUserId) }
        c.userId = "alice"
        #expect(throws: Never.self) { try c.validate() }
    }

    @Test("endpoint parsing: host, port, default path, IPv6")
    func endpoints() {
        let a = ClientTransport.Endpoint("ws://127.0.0.1:9600")
        #expect(a?.host == "127.0.0.1" && a?.port == 9600 && a?.path == "/v1")
        let b = ClientTransport.Endpoint("ws://[::1]:1234/v1")
        #expect(b?.host == "::1" && b?.port == 1234)
        #expect(ClientTransport.Endpoint("http://x:1") == nil)
        #expect(ClientTransport.Endpoint("ws://host:notaport") == nil)
        #expect(a?.secure == false)
    }

    @Test("endpoint parsing: wss:// is secure, port 443 by default")
    func secureEndpoints() {
        let a = ClientTransport.Endpoint("wss://rtm.example.com")
        #expect(a?.secure == true && a?.port == 443 && a?.host == "rtm.example.com" && a?.path == "/v1")
        let b = ClientTransport.Endpoint("wss://127.0.0.1:9601/v1")
        #expect(b?.secure == true && b?.port == 9601)
        #expect(ClientTransport.Endpoint("ws://rtm.example.com")?.port == 80)
    }
}
