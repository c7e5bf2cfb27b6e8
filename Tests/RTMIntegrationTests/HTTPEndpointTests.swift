import Foundation
import NIOCore
import RTMTestSupport
import Testing

/// The plain HTTP side of the endpoint, spoken to over raw TCP: every request that does not
/// upgrade gets the status that names its problem (RFC 6455 §4.2, RFC 9110), the headers those
/// statuses call for, and a one-line body in our words; then the server closes.
@Suite(.realTime, .serialized)
struct HTTPEndpointTests {
    /// One HTTP answer: status code, headers (names lowercased), body.
    struct Answer {
        let status: Int
        let headers: [String: String]
        let body: String
        let raw: String
    }

    /// Sends `request` on a new connection and reads the answer the server writes before it closes.
    static func exchange(_ request: String, port: Int) async throws -> Answer {
        let peer = try await RawPeer.connect(port: port)
        try await peer.write(request)
        #expect(await peer.waitForClose(within: soon), "the server kept the connection open after: \(request)")
        let raw = String(buffer: peer.received)
        let parts = raw.components(separatedBy: "\r\n\r\n")
        let lines = parts[0].components(separatedBy: "\r\n")
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: parts.dropFirst().joined(separator: "\r\n\r\n"), raw: raw)
    }

    /// An upgrade request for `/v1` as a client builds it, with `drop` headers left out and
    /// `extra` lines added.
    static func upgrade(method: String = "GET", drop: Set<String> = [], extra: [String] = []) -> String {
        let lines = [
            "Host: 127.0.0.1", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: rtm.v1",
        ].filter { line in !drop.contains(String(line.prefix { $0 != ":" })) } + extra
        return "\(method) /v1 HTTP/1.1\r\n" + lines.map { $0 + "\r\n" }.joined() + "\r\n"
    }

    @Test("an upgrade without Sec-WebSocket-Key: 400 naming the missing key, not the subprotocol")
    func missingKey() async throws {
        let harness = try await Harness.start()
        let answer = try await Self.exchange(Self.upgrade(drop: ["Sec-WebSocket-Key"]), port: harness.port)
        #expect(answer.status == 400, "\(answer.raw)")
        #expect(answer.body.hasPrefix("missing Sec-WebSocket-Key header"), "\(answer.body)")
        #expect(!answer.body.contains("subprotocol"))
        let twoKeys = try await Self.exchange(Self.upgrade(extra: ["Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA=="]), port: harness.port)
        #expect(twoKeys.status == 400)
        #expect(twoKeys.body.hasPrefix("more than one Sec-WebSocket-Key header"), "\(twoKeys.body)")
        let shortKey = try await Self.exchange(Self.upgrade(drop: ["Sec-WebSocket-Key"], extra: ["Sec-WebSocket-Key: c2hvcnQ="]), port: harness.port)
        #expect(shortKey.status == 400)
        #expect(shortKey.body.hasPrefix("Sec-WebSocket-Key must be 16 random bytes in base64"), "\(shortKey.body)")
    }

    @Test("RFC 6455 §4.4: an upgrade with Sec-WebSocket-Version 8 gets 426 and Sec-WebSocket-Version: 13; a missing version gets 400 naming it")
    func wrongVersion() async throws {
        let harness = try await Harness.start()
        let old = try await Self.exchange(Self.upgrade(drop: ["Sec-WebSocket-Version"], extra: ["Sec-WebSocket-Version: 8"]), port: harness.port)
        #expect(old.status == 426, "\(old.raw)")
        #expect(old.headers["sec-websocket-version"] == "13")
        #expect(old.body == "unsupported WebSocket version 8: this server speaks version 13\n")
        let missing = try await Self.exchange(Self.upgrade(drop: ["Sec-WebSocket-Version"]), port: harness.port)
        #expect(missing.status == 400, "\(missing.raw)")
        #expect(missing.headers["sec-websocket-version"] == "13")
        #expect(missing.body.hasPrefix("missing Sec-WebSocket-Version header"))
        // The subprotocol is still what a correct upgrade without it is told about.
        let noProtocol = try await Self.exchange(Self.upgrade(drop: ["Sec-WebSocket-Protocol"]), port: harness.port)
        #expect(noProtocol.status == 400)
        #expect(noProtocol.body.contains("rtm.v1"))
    }

    @Test("another path: 404 listing the endpoints")
    func unknownPath() async throws {
        let harness = try await Harness.start()
        let answer = try await Self.exchange("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", port: harness.port)
        #expect(answer.status == 404, "\(answer.raw)")
        #expect(answer.body.hasPrefix("no such endpoint: /nope"))
        #expect(answer.body.contains("/v1") && answer.body.contains("/health"))
    }

    @Test("bytes that are not HTTP: 400 with a short text body saying what the endpoint expects")
    func garbage() async throws {
        let harness = try await Harness.start()
        let answer = try await Self.exchange("\u{1}\u{2} NOT HTTP\r\n\r\n", port: harness.port)
        #expect(answer.status == 400, "\(answer.raw)")
        #expect(answer.headers["content-type"] == "text/plain")
        #expect(answer.body.hasPrefix("not an HTTP request this server understands"), "\(answer.body)")
        #expect(answer.headers["content-length"] == "\(answer.body.utf8.count)")
    }

    @Test("RFC 9110 §15.5.6: a method the path does not take gets 405 with Allow; HEAD answers the headers alone")
    func methodNotAllowed() async throws {
        let harness = try await Harness.start()
        let health = try await Self.exchange("POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", port: harness.port)
        #expect(health.status == 405, "\(health.raw)")
        #expect(health.headers["allow"] == "GET, HEAD")
        let upgrade = try await Self.exchange(Self.upgrade(method: "POST", extra: ["Content-Length: 0"]), port: harness.port)
        #expect(upgrade.status == 405, "\(upgrade.raw)")
        #expect(upgrade.headers["allow"] == "GET")
        let head = try await Self.exchange("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n", port: harness.port)
        #expect(head.status == 200, "\(head.raw)")
        #expect(head.body.isEmpty)
    }

    @Test("RFC 9110 §15.5.6: the admin API's 405 names the method the endpoint takes in Allow")
    func adminMethodNotAllowed() async throws {
        let admin = try await AdminHarness.start()
        let answer = try await Self.exchange("DELETE /v1/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(AdminHarness.key)\r\nConnection: close\r\n\r\n",
                                             port: admin.adminPort)
        #expect(answer.status == 405, "\(answer.raw)")
        #expect(answer.headers["allow"] == "GET")
        let post = try await Self.exchange("GET /v1/publish HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(AdminHarness.key)\r\nConnection: close\r\n\r\n",
                                           port: admin.adminPort)
        #expect(post.status == 405)
        #expect(post.headers["allow"] == "POST")
    }
}
