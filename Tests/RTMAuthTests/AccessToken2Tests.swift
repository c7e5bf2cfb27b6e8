import Foundation
import Testing
@testable import RTMAuth

/// AccessToken2 ("007") against the reference builders' published test vectors (AgoraIO/Tools,
/// DynamicKey/AgoraDynamicKey: `java/src/test/java/io/agora/media/AccessToken2Test.java`
/// `build_ServiceRtm`, the same token in the C# tests; `go/src/accesstoken2/accesstoken_test.go`
/// `Test_AssessToken_ServiceRtm` for Go's differently flushed zlib stream).
struct AccessToken2Tests {
    static let appId = "970CA35de60c44645bbae8a215061b33"
    static let certificate = "5CFd2fd1755d40ecb72977518be15d3b"
    static let issueTs: UInt32 = 1_111_111
    static let expire: UInt32 = 600

    /// RTM service, user "test_user", login privilege 600, salt 1 (Java, C#; Python's zlib gives the same).
    static let rtmVector = "007eJxTYOCdJftjyTM2zxW6Xhm/5T0j5LdcUt/xYVt48fb5Mp3PX9coMFiaGzg7GpumpJoZJJuYmJmYJiUlplokGhmaGpgZJhkbu38RYIhgYmBgZABhJiBmBPM5GUpSi0viS4tTiwBZVh6A"
    /// The same token built by the Go reference (another zlib encoder: sync flush before the end).
    static let rtmVectorGo = "007eJxSYOCdJftjyTM2zxW6Xhm/5T0j5LdcUt/xYVt48fb5Mp3PX9coMFiaGzg7GpumpJoZJJuYmJmYJiUlplokGhmaGpgZJhkbu38RYIhgYmBgZABhJgZGBkYwn5OhJLW4JL60OLUIEAAA//9ZVh6A"
    /// RTC service only (channel "7d72365eb983485397e3e3f9d460bdda", uid "2882341273").
    static let rtcVector = "007eJxTYBBbsMMnKq7p9Hf/HcIX5kce9b518kCiQgSr5Zrp4X1Tu6UUGCzNDZwdjU1TUs0Mkk1MzExMk5ISUy0SjQxNDcwMk4yN3b8IMEQwMTAwMoAwBIL4CgzmKeZGxmamqUmWFsYmFqbGluapxqnGaZYpJmYGSSkpiVwMRhYWRsYmhkbmxgDCaiTj"
    /// RTC (4 privileges) + RTM + chat services (`build_multi_service`).
    static let multiServiceVector = "007eJxTYPg19dsX8xO2Nys/bpSeoH/0j9CvSs1JWib9291PKC53l85UYLA0N3B2NDZNSTUzSDYxMTMxTUpKTLVINDI0NTAzTDI2dv8iwBDBxMDAyMDAwAwkWYAYxGcCk8xgkgVMKjCYp5gbGZuZpiZZWhibWJgaW5qnGqcap1mmmJgZJKWkJHIxGFlYGBmbGBqZGzMBzYGYxMlQklpcEl9anFrEChdEVgoAw6ct/Q=="

    static func kind(_ token: String, user: String = "test_user", cert: String = Self.certificate,
                     app: String = Self.appId, at time: UInt32) -> TokenError.Kind? {
        do {
            try AccessToken2.verifyRTMToken(token, appId: app, appCertificate: cert, userId: user, now: time)
            return nil
        } catch { return error.kind }
    }

    @Test("RTM token: byte-identical to the reference AccessToken2 build_ServiceRtm vector")
    func rtmVector() {
        let token = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "test_user",
                                               expire: Self.expire, issueTs: Self.issueTs, salt: 1)
        #expect(token == Self.rtmVector)
    }

    @Test("parse reads back the reference vectors (Java/Python and Go zlib streams)")
    func parse() throws {
        for vector in [Self.rtmVector, Self.rtmVectorGo] {
            let contents = try AccessToken2.parse(vector)
            #expect(contents.appId == Self.appId)
            #expect(contents.issueTs == Self.issueTs)
            #expect(contents.expire == Self.expire)
            #expect(contents.salt == 1)
            #expect(contents.expiresAt == Self.issueTs + Self.expire)
            #expect(contents.serviceTypes == [2])
            #expect(contents.rtm == AccessToken2.RTMService(userId: "test_user", privileges: [1: 600]))
            #expect(contents.signature.count == 32)
        }
        let multi = try AccessToken2.parse(Self.multiServiceVector)
        #expect(multi.serviceTypes == [1, 2, 5])
        #expect(multi.rtm == AccessToken2.RTMService(userId: "test_user", privileges: [1: 600]))
        let rtc = try AccessToken2.parse(Self.rtcVector)
        #expect(rtc.serviceTypes == [1])
        #expect(rtc.rtm == nil)
    }

    @Test("verify the reference vectors: valid until issueTs + 600, then .expired")
    func verifyVectors() throws {
        let end = Self.issueTs + Self.expire
        for vector in [Self.rtmVector, Self.rtmVectorGo, Self.multiServiceVector] {
            #expect(try AccessToken2.verifyRTMToken(vector, appId: Self.appId, appCertificate: Self.certificate,
                                                    userId: "test_user", now: Self.issueTs) == end)
            #expect(Self.kind(vector, at: end) == nil)
            #expect(Self.kind(vector, at: end + 1) == .expired)
        }
        #expect(Self.kind(Self.rtcVector, at: Self.issueTs) == .noPrivilege)
    }

    @Test("round trip build → verify; login privilege shorter than, or 0 (= as long as) the token")
    func roundTrip() throws {
        let now: UInt32 = 1_700_000_000
        let token = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                               expire: 3600)
        let issued = try AccessToken2.parse(token).issueTs
        #expect(try AccessToken2.verifyRTMToken(token, appId: Self.appId, appCertificate: Self.certificate,
                                                userId: "alice", now: issued) == issued + 3600)

        let shortLogin = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                                    expire: 3600, loginPrivilegeExpire: 60, issueTs: now)
        #expect(try AccessToken2.verifyRTMToken(shortLogin, appId: Self.appId, appCertificate: Self.certificate,
                                                userId: "alice", now: now) == now + 60)
        #expect(Self.kind(shortLogin, user: "alice", at: now + 61) == .expired)

        let zeroLogin = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                                   expire: 3600, loginPrivilegeExpire: 0, issueTs: now)
        #expect(try AccessToken2.verifyRTMToken(zeroLogin, appId: Self.appId, appCertificate: Self.certificate,
                                                userId: "alice", now: now + 3000) == now + 3600)
        #expect(Self.kind(zeroLogin, user: "alice", at: now + 3601) == .expired)

        // A privilege longer than the token is cut at the token's end.
        let longLogin = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                                   expire: 60, loginPrivilegeExpire: 3600, issueTs: now)
        #expect(try AccessToken2.verifyRTMToken(longLogin, appId: Self.appId, appCertificate: Self.certificate,
                                                userId: "alice", now: now) == now + 60)

        // Non-ASCII user ids survive.
        let unicode = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "zoë-🚀",
                                                 expire: 60, issueTs: now)
        #expect(Self.kind(unicode, user: "zoë-🚀", at: now) == nil)
    }

    @Test("verify rejects wrong certificate, user, app, expiry, tampering and garbage with the kind")
    func rejects() throws {
        let now: UInt32 = 1_700_000_000
        let good = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                              expire: 60, issueTs: now)
        #expect(Self.kind(good, user: "alice", at: now) == nil)
        #expect(Self.kind(good, user: "bob", at: now) == .badSignature)
        #expect(Self.kind(good, user: "alice", cert: "00000000000000000000000000000000", at: now) == .badSignature)
        #expect(Self.kind(good, user: "alice", app: "ffffffffffffffffffffffffffffffff", at: now) == .wrongApp)
        #expect(Self.kind(good, user: "alice", at: now + 61) == .expired)

        // Re-signed content with a longer expiry but the old signature.
        var content = try Zlib.decompress(Array(Data(base64Encoded: String(good.dropFirst(3)))!), limit: 4096)
        let expireOffset = 2 + 32 + 2 + 32 + 4
        content[expireOffset] = 0xFF
        let tampered = "007" + Data(Zlib.compress(content)).base64EncodedString()
        #expect(try AccessToken2.parse(tampered).expire > 60)
        #expect(Self.kind(tampered, user: "alice", at: now) == .badSignature)

        for garbage in ["", "007", "007!!!", "007AAAA", "006" + Self.appId + "AAAA", "eJxTYOCdJftjyTM2",
                        String(Self.rtmVector.dropLast(8)),
                        "007" + Data(Zlib.compress([0x20, 0x00, 0x01])).base64EncodedString()] {
            #expect(Self.kind(garbage, at: now) == .malformed, "\(garbage)")
        }
        do {
            _ = try AccessToken2.parse("007AAAA")
            Issue.record("garbage parsed")
        } catch {
            #expect(error.reason == "token content is not a valid zlib stream")
        }
    }

    @Test("RTMToken.verify dispatches on the version and reports expiresAt")
    func dispatch() throws {
        let now: UInt32 = 1_700_000_000
        let v007 = AccessToken2.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                              expire: 3600, loginPrivilegeExpire: 600, issueTs: now - 10)
        #expect(try RTMToken.verify(v007, appId: Self.appId, appCertificate: Self.certificate, userId: "alice", now: now)
                == VerifiedRTMToken(version: "007", expiresAt: now - 10 + 600))

        let v006 = AccessToken006.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                                privilegeExpireTimestamp: now + 60, ts: now + 86_400)
        #expect(try RTMToken.verify(v006, appId: Self.appId, appCertificate: Self.certificate, userId: "alice", now: now)
                == VerifiedRTMToken(version: "006", expiresAt: now + 60))
        let v006NoExpiry = AccessToken006.buildRTMToken(appId: Self.appId, appCertificate: Self.certificate, userId: "alice",
                                                        privilegeExpireTimestamp: 0, ts: now + 86_400)
        #expect(try RTMToken.verify(v006NoExpiry, appId: Self.appId, appCertificate: Self.certificate, userId: "alice", now: now)
                == VerifiedRTMToken(version: "006", expiresAt: nil))

        #expect(try RTMToken.verify(Self.rtmVector, appId: Self.appId, appCertificate: Self.certificate,
                                    userId: "test_user", now: Self.issueTs).expiresAt == Self.issueTs + Self.expire)

        func kind(_ token: String, user: String = "alice", at time: UInt32 = now) -> TokenError.Kind? {
            do {
                _ = try RTMToken.verify(token, appId: Self.appId, appCertificate: Self.certificate, userId: user, now: time)
                return nil
            } catch { return error.kind }
        }
        #expect(kind(v007, user: "bob") == .badSignature)
        #expect(kind(v006, user: "bob") == .badSignature)
        #expect(kind(v007, at: now + 600) == .expired)
        #expect(kind(v006, at: now + 61) == .expired)
        #expect(kind("") == .malformed)
        #expect(kind("008abc") == .malformed)
        #expect(kind("hello") == .malformed)
    }
}
