import Testing
@testable import RTMServer

/// The URL of an outgoing HTTP request (webhooks, the authorization hook, a cluster node's
/// `/health` question), as a value.
struct WebhookTargetTests {
    @Test("An IPv6 address is connected to without its brackets and named with them in Host; a name or IPv4 address as written")
    func ipv6Host() throws {
        let v6 = try #require(WebhookHTTPClient.Target("http://[::1]:9600/health"))
        #expect(v6.connectHost == "::1" && v6.host == "[::1]" && v6.port == 9600 && v6.path == "/health")
        let v4 = try #require(WebhookHTTPClient.Target("http://127.0.0.1:41643/health"))
        #expect(v4.connectHost == "127.0.0.1" && v4.port == 41643)
        let name = try #require(WebhookHTTPClient.Target("https://hooks.example.com/rtm?x=1"))
        #expect(name.connectHost == "hooks.example.com" && name.port == 443 && name.path == "/rtm?x=1" && name.secure)
    }
}
