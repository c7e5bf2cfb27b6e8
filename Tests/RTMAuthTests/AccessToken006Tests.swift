import Testing
@testable import RTMAuth

/// The reference builders' published test vectors (AgoraIO/Tools, DynamicKey/AgoraDynamicKey:
/// `RtmTokenBuilderTest` and `AccessTokenTest` in every language).
struct AccessToken006Tests {
    static let appId = "970CA35de60c44645bbae8a215061b33"
    static let certificate = "5CFd2fd1755d40ecb72977518be15d3b"

    @Test("RTM token: byte-identical to the reference RtmTokenBuilder vector")
    func rtmVector() {
        let token = AccessToken006.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "test_user",
                                                 privilegeExpireTimestamp: 1_446_455_471, salt: 1, ts: 1_111_111)
        #expect(token == "006970CA35de60c44645bbae8a215061b33IAAsR0qgiCxv0vrpRcpkz5BrbfEWCBZ6kvR6t7qG/wJIQob86ogAAAAAEAABAAAAR/QQAAEA6AOvKDdW")
    }

    @Test("General 006 token (channel + uid, join privilege): the reference AccessToken vector")
    func accessTokenVector() {
        let token = AccessToken006.build(appId: Self.appId, appCertificate: Self.certificate,
                                         channelName: "7d72365eb983485397e3e3f9d460bdda", uid: "2882341273",
                                         salt: 1, ts: 1_111_111, privileges: [1: 1_446_455_471])
        #expect(token == "006970CA35de60c44645bbae8a215061b33IACV0fZUBw+72cVoL9eyGGh3Q6Poi8bgjwVLnyKSJyOXR7dIfRBXoFHlEAABAAAAR/QQAAEAAQCvKDdW")
    }

    @Test("parse reads back salt, ts and privileges")
    func parse() throws {
        let contents = try AccessToken006.parse("006970CA35de60c44645bbae8a215061b33IAAsR0qgiCxv0vrpRcpkz5BrbfEWCBZ6kvR6t7qG/wJIQob86ogAAAAAEAABAAAAR/QQAAEA6AOvKDdW")
        #expect(contents.appId == Self.appId)
        #expect(contents.salt == 1)
        #expect(contents.ts == 1_111_111)
        #expect(contents.privileges == [1000: 1_446_455_471])
        #expect(contents.crcUid == 0)   // crc32 of the empty uid
    }

    @Test("verify: accepts a good token; rejects wrong user, certificate, app, expiry and garbage with the kind")
    func verify() throws {
        let now: UInt32 = 1_700_000_000
        let good = AccessToken006.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                                privilegeExpireTimestamp: now + 60, ts: now + 86_400)
        #expect(try AccessToken006.verifyRTMToken(good, appId: Self.appId, appCertificate: Self.certificate, userId: "alice", now: now) == now + 60)

        func kind(_ token: String, user: String = "alice", cert: String = Self.certificate, app: String = Self.appId, at time: UInt32 = now) -> TokenError.Kind? {
            do {
                try AccessToken006.verifyRTMToken(token, appId: app, appCertificate: cert, userId: user, now: time)
                return nil
            } catch { return error.kind }
        }
        #expect(kind(good, user: "bob") == .badSignature)
        #expect(kind(good, cert: "00000000000000000000000000000000") == .badSignature)
        #expect(kind(good, app: "ffffffffffffffffffffffffffffffff") == .wrongApp)
        #expect(kind(good, at: now + 61) == .expired)
        #expect(kind(good, at: now + 86_401) == .expired)
        #expect(kind("") == .malformed)
        #expect(kind("007abc") == .malformed)
        #expect(kind("006" + Self.appId + "!!!") == .malformed)
        #expect(kind("006" + Self.appId + "AAAA") == .malformed)
        // Privilege expiry 0 means the privilege itself never expires (the token's ts still applies).
        let noExpiry = AccessToken006.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                                    privilegeExpireTimestamp: 0, ts: now + 10)
        #expect(kind(noExpiry, at: now + 5) == nil)
    }
}
