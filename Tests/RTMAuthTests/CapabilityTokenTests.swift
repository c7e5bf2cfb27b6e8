import Foundation
import Testing
@testable import RTMAuth

/// The capability token (a JWT, HS256, signed with the app certificate) and its grants.
struct CapabilityTokenTests {
    static let appId = "0123456789abcdef0123456789abcdef"
    static let certificate = "fedcba9876543210fedcba9876543210"
    static let now: UInt32 = 1_800_000_000

    /// Minted by Python's hmac and base64 modules (no code of ours): `aud` a list, `iat`, `nbf`,
    /// `exp` in 2100, `room.*` subscribe+publish, `lobby` everything, user `bob` send.
    static let independent = "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJhdWQiOlsiMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYiLCJvdGhlciJdLCJzdWIiOiJhbGljZSIsImlhdCI6MTcwMDAwMDAwMCwiZXhwIjo0MTAyNDQ0ODAwLCJuYmYiOjE3MDAwMDAwMDAsInJ0bSI6eyJjaGFubmVscyI6eyJyb29tLioiOlsic3Vic2NyaWJlIiwicHVibGlzaCJdLCJsb2JieSI6WyIqIl19LCJ1c2VycyI6eyJib2IiOlsic2VuZCJdfX19.HhQzBtT0uQn6W8RH1VcummdKFYbDVE_ZDS_60TMz4tU"

    static func verify(_ token: String, user: String = "alice", certificate: String? = certificate) throws(TokenError) -> VerifiedCapabilities {
        try CapabilityToken.verify(token, appId: appId, userId: user, appCertificate: certificate, now: now)
    }

    @Test("a token minted by another implementation (Python hmac) verifies, with its grants")
    func independentToken() throws {
        let verified = try Self.verify(Self.independent)
        #expect(verified.expiresAt == 4_102_444_800)
        #expect(verified.issuedAt == 1_700_000_000)
        let caps = verified.capabilities
        #expect(caps.allows(.subscribe, channel: "room.a"))
        #expect(caps.allows(.publish, channel: "room."))
        #expect(!caps.allows(.presence, channel: "room.a"))
        #expect(!caps.allows(.subscribe, channel: "roomx"))
        #expect(caps.allows(.lock, channel: "lobby") && caps.allows(.streamJoin, channel: "lobby"))
        #expect(!caps.allows(.subscribe, channel: "lobby2"))
        #expect(caps.allows(.send, user: "bob") && !caps.allows(.send, user: "carol") && !caps.allows(.status, user: "bob"))
    }

    @Test("mint then verify gives the grants back; the expiry is the token's")
    func roundTrip() throws {
        let caps = Capabilities(channels: ["room.*": [.subscribe, .publish], "*": [.presence]], users: ["*": [.send, .status]])
        let token = CapabilityToken.mint(caps, appId: Self.appId, userId: "alice", appCertificate: Self.certificate,
                                         issuedAt: Self.now, expiresAt: Self.now + 60)
        let verified = try Self.verify(token)
        #expect(verified.capabilities == caps)
        #expect(verified.expiresAt == Self.now + 60)
        let forever = CapabilityToken.mint(caps, appId: Self.appId, userId: "alice", appCertificate: Self.certificate,
                                           issuedAt: Self.now, expiresAt: nil)
        #expect(try Self.verify(forever).expiresAt == nil)
    }

    @Test("refused: another certificate, a changed claim, another user or app, expired, not yet valid")
    func refusals() throws {
        let caps = Capabilities(channels: ["*": [.subscribe]])
        let token = CapabilityToken.mint(caps, appId: Self.appId, userId: "alice", appCertificate: Self.certificate,
                                         issuedAt: Self.now, expiresAt: Self.now + 60)
        #expect(throws: TokenError.self) { try Self.verify(token, certificate: "another-certificate-entirely-000") }
        do { _ = try Self.verify(token, certificate: "x"); Issue.record("accepted") } catch { #expect(error.kind == .badSignature) }
        do { _ = try Self.verify(token, user: "bob"); Issue.record("accepted") } catch { #expect(error.reason.contains("'alice', not 'bob'")) }
        do {
            _ = try CapabilityToken.verify(token, appId: "another", userId: "alice", appCertificate: Self.certificate, now: Self.now)
            Issue.record("accepted")
        } catch { #expect(error.kind == .wrongApp) }
        do {
            _ = try CapabilityToken.verify(token, appId: Self.appId, userId: "alice", appCertificate: Self.certificate, now: Self.now + 60)
            Issue.record("accepted")
        } catch { #expect(error.kind == .expired) }
        // The independent token is not valid before 1,700,000,000.
        do {
            _ = try CapabilityToken.verify(Self.independent, appId: Self.appId, userId: "alice", appCertificate: Self.certificate, now: 1_600_000_000)
            Issue.record("accepted")
        } catch { #expect(error.reason.contains("not valid before")) }
        // A claim changed after signing (the payload swapped for another token's).
        let parts = token.split(separator: ".")
        let other = CapabilityToken.mint(Capabilities(channels: ["*": [.publish]]), appId: Self.appId, userId: "alice",
                                         appCertificate: "another", issuedAt: Self.now, expiresAt: nil).split(separator: ".")
        do { _ = try Self.verify("\(parts[0]).\(other[1]).\(parts[2])"); Issue.record("accepted") } catch { #expect(error.kind == .badSignature) }
    }

    @Test("refused with a reason naming it: alg none or RS256, not three parts, unknown operation, bad pattern, no rtm claim")
    func malformed() throws {
        func unsigned(header: String, claims: String) -> String {
            func b64(_ s: String) -> String {
                Data(s.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_")
            }
            return "\(b64(header)).\(b64(claims))."
        }
        let claims = #"{"aud":"\#(Self.appId)","sub":"alice","iat":1700000000,"rtm":{"channels":{"*":["subscribe"]}}}"#
        func reason(_ token: String, certificate: String? = Self.certificate) -> String {
            do { _ = try Self.verify(token, certificate: certificate); return "accepted" } catch { return error.reason }
        }
        #expect(reason(unsigned(header: #"{"alg":"none"}"#, claims: claims)).contains("only HS256"))
        #expect(reason(unsigned(header: #"{"alg":"RS256"}"#, claims: claims)).contains("'RS256'"))
        #expect(reason("abc.def").contains("three base64url parts"))
        #expect(reason(unsigned(header: #"{"alg":"HS256"}"#, claims: #"{"aud":"\#(Self.appId)","sub":"alice","iat":1,"rtm":{"channels":{"*":["fly"]}}}"#),
                       certificate: nil).contains("unknown operation 'fly'"))
        #expect(reason(unsigned(header: #"{"alg":"HS256"}"#, claims: #"{"aud":"\#(Self.appId)","sub":"alice","iat":1,"rtm":{"channels":{"a*b":["publish"]}}}"#),
                       certificate: nil).contains("before its end"))
        #expect(reason(unsigned(header: #"{"alg":"HS256"}"#, claims: #"{"aud":"\#(Self.appId)","sub":"alice","iat":1}"#),
                       certificate: nil).contains("no 'rtm' claim"))
        // When it was issued orders a session's tokens: required.
        #expect(reason(unsigned(header: #"{"alg":"HS256"}"#, claims: #"{"aud":"\#(Self.appId)","sub":"alice","rtm":{}}"#),
                       certificate: nil).contains("no iat claim"))
        #expect(reason(unsigned(header: #"{"alg":"HS256"}"#, claims: #"{"aud":"\#(Self.appId)","sub":"alice","iat":"soon","rtm":{}}"#),
                       certificate: nil).contains("iat claim is not a number"))
        // Without a certificate (an app whose logins need no token) the grants apply unsigned.
        #expect(reason(unsigned(header: #"{"alg":"HS256"}"#, claims: claims), certificate: nil) == "accepted")
    }

    @Test("patterns: exact, trailing-* prefix, * alone; the command-line grant form")
    func patterns() throws {
        #expect(Capabilities.matches("room.*", "room.a") && Capabilities.matches("room.*", "room.") && !Capabilities.matches("room.*", "room"))
        #expect(Capabilities.matches("*", "anything") && Capabilities.matches("lobby", "lobby") && !Capabilities.matches("lobby", "lobby2"))
        let grant = try Capabilities.parseGrant("room.*=subscribe, publish", as: Capabilities.ChannelOperation.self)
        #expect(grant.pattern == "room.*" && grant.operations == [.subscribe, .publish])
        #expect(try Capabilities.parseGrant("*=*", as: Capabilities.UserOperation.self).operations == Set(Capabilities.UserOperation.allCases))
        #expect(throws: TokenError.self) { try Capabilities.parseGrant("room.*", as: Capabilities.ChannelOperation.self) }
        #expect(throws: TokenError.self) { try Capabilities.parseGrant("room=jump", as: Capabilities.ChannelOperation.self) }
    }
}
