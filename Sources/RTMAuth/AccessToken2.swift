internal import CRTMZlib
import Crypto
import Foundation

/// AccessToken2 (version "007") RTM login tokens, byte-compatible with the reference token
/// builders (AgoraIO/Tools, `DynamicKey/AgoraDynamicKey`, `AccessToken2` + `RtmTokenBuilder2`),
/// so that tokens minted by existing "007" token servers are accepted.
///
/// Layout: `"007" + base64(zlib(string signature + signingInfo))` where (little endian, a string
/// is a uint16 length then the bytes, maps are sorted by key and prefixed by a uint16 count)
/// - `signingInfo = string appId, uint32 issueTs, uint32 expire, uint32 salt, uint16 serviceCount,
///   services` (services in ascending type order),
/// - a service is `uint16 type, map<uint16 privilege, uint32 seconds>` then its own fields; for
///   RTM (type 2) that is `string userId`, and privilege 1 is "login",
/// - `signing   = HMAC-SHA256(key: uint32 salt, HMAC-SHA256(key: uint32 issueTs, appCertificate))`,
/// - `signature = HMAC-SHA256(key: signing, signingInfo)`.
///
/// All times in the token are relative to `issueTs`: the token is valid for `expire` seconds, and
/// each privilege for its own value in seconds, 0 meaning "as long as the token" (the reference
/// builders' default). A privilege never outlives the token.
///
/// ```swift
/// let token = AccessToken2.buildRTMToken(appId: appId, appCertificate: cert, userId: "alice",
///                                        expire: 3600)
/// let expiry = try AccessToken2.verifyRTMToken(token, appId: appId, appCertificate: cert,
///                                              userId: "alice", now: now)
/// ```
public enum AccessToken2 {
    /// The version prefix.
    public static let version = "007"
    /// Service type of RTM.
    public static let rtmServiceType: UInt16 = 2
    /// Privilege number of "RTM login" within the RTM service.
    public static let rtmLoginPrivilege: UInt16 = 1
    /// Largest decompressed token accepted by `parse` (real tokens are a few hundred bytes).
    public static let maxDecompressedBytes = 64 * 1024

    /// The RTM service of a token.
    public struct RTMService: Sendable, Equatable {
        /// The user id the token is for.
        public var userId: String
        /// privilege → validity in seconds after `issueTs` (0 = as long as the token).
        public var privileges: [UInt16: UInt32]
    }

    /// The decoded parts of a token.
    public struct Contents: Sendable, Equatable {
        /// HMAC-SHA256 signature (32 bytes).
        public var signature: [UInt8]
        /// The app id.
        public var appId: String
        /// When the token was issued (Unix seconds).
        public var issueTs: UInt32
        /// How long the token is valid after `issueTs`, in seconds.
        public var expire: UInt32
        /// Random salt.
        public var salt: UInt32
        /// The types of all services in the token, in token order (1 RTC, 2 RTM, 4 FPA, 5 chat, …).
        public var serviceTypes: [UInt16]
        /// The RTM service, if the token has one.
        public var rtm: RTMService?
        /// The packed signing info, exactly as signed.
        var signingInfo: [UInt8]

        /// When the token itself expires: `issueTs + expire` (Unix seconds, saturating).
        public var expiresAt: UInt32 { UInt32(clamping: UInt64(issueTs) + UInt64(expire)) }
    }

    /// Builds an RTM login token for `userId`, valid for `expire` seconds from `issueTs`, as the
    /// reference `RtmTokenBuilder2.buildToken` does (which gives the login privilege the same
    /// `expire`). `loginPrivilegeExpire` (seconds after `issueTs`, 0 = as long as the token)
    /// defaults to `expire`; `issueTs` to now and `salt` to a random number, as in the reference.
    public static func buildRTMToken(
        appId: String, appCertificate: String, userId: String, expire: UInt32,
        loginPrivilegeExpire: UInt32? = nil, issueTs: UInt32? = nil,
        salt: UInt32 = UInt32.random(in: 1...99_999_999)
    ) -> String {
        let issueTs = issueTs ?? UInt32(clamping: Int(Date().timeIntervalSince1970))
        var signingInfo = Packer()
        signingInfo.string(Array(appId.utf8))
        signingInfo.uint32(issueTs)
        signingInfo.uint32(expire)
        signingInfo.uint32(salt)
        signingInfo.uint16(1)
        signingInfo.uint16(rtmServiceType)
        signingInfo.uint16(1)
        signingInfo.uint16(rtmLoginPrivilege)
        signingInfo.uint32(loginPrivilegeExpire ?? expire)
        signingInfo.string(Array(userId.utf8))

        let signature = sign(appCertificate: appCertificate, issueTs: issueTs, salt: salt, signingInfo: signingInfo.bytes)
        var content = Packer()
        content.string(signature)
        return version + Data(Zlib.compress(content.bytes + signingInfo.bytes)).base64EncodedString()
    }

    /// Parses a token without checking its signature. Services before the RTM one must be of a
    /// type whose layout is known (RTC, RTM, streaming, FPA, chat, education); parsing stops at
    /// the first unknown type after it.
    public static func parse(_ token: String) throws(TokenError) -> Contents {
        guard token.hasPrefix(version) else {
            throw TokenError(.malformed, "not an AccessToken2 \(version) token (it starts with '\(token.prefix(3))')")
        }
        var base64 = String(token.dropFirst(version.count))
        if base64.count % 4 != 0 { base64 += String(repeating: "=", count: 4 - base64.count % 4) }
        guard !base64.isEmpty, let compressed = Data(base64Encoded: base64) else {
            throw TokenError(.malformed, "token content is not base64")
        }
        let content = try Zlib.decompress(Array(compressed), limit: maxDecompressedBytes)

        var reader = Unpacker(content)
        guard let signature = reader.string() else { throw TokenError(.malformed, "token content is truncated") }
        let signingInfo = Array(content.dropFirst(2 + signature.count))
        guard let appIdBytes = reader.string(), let issueTs = reader.uint32(), let expire = reader.uint32(),
              let salt = reader.uint32(), let serviceCount = reader.uint16() else {
            throw TokenError(.malformed, "token signing info is truncated")
        }
        guard let appId = String(bytes: appIdBytes, encoding: .utf8) else {
            throw TokenError(.malformed, "token app id is not UTF-8")
        }

        var serviceTypes: [UInt16] = []
        var rtm: RTMService?
        services: for _ in 0..<serviceCount {
            guard let type = reader.uint16() else { throw TokenError(.malformed, "token services are truncated") }
            serviceTypes.append(type)
            guard let fields = ServiceLayout(type: type) else {
                if rtm != nil { break services }   // only what follows the RTM service is unknown
                throw TokenError(.malformed, "token has a service of unsupported type \(type) before its RTM service")
            }
            guard let privileges = reader.privileges() else {
                throw TokenError(.malformed, "privileges of token service \(type) are truncated")
            }
            var strings: [[UInt8]] = []
            for _ in 0..<fields.strings {
                guard let string = reader.string() else { throw TokenError(.malformed, "token service \(type) is truncated") }
                strings.append(string)
            }
            if fields.hasRole {
                guard reader.uint16() != nil else { throw TokenError(.malformed, "token service \(type) is truncated") }
            }
            if type == rtmServiceType {
                guard let userId = String(bytes: strings[0], encoding: .utf8) else {
                    throw TokenError(.malformed, "token user id is not UTF-8")
                }
                rtm = RTMService(userId: userId, privileges: privileges)
            }
        }
        return Contents(signature: signature, appId: appId, issueTs: issueTs, expire: expire, salt: salt,
                        serviceTypes: serviceTypes, rtm: rtm, signingInfo: signingInfo)
    }

    /// Verifies an RTM login token for `userId` at time `now` (Unix seconds). Returns when the
    /// login privilege ends (Unix seconds): the earlier of the token's end (`issueTs + expire`) and
    /// the privilege's own end (`issueTs + value`, unless the value is 0). Throws a `TokenError`
    /// saying what is wrong; a token for another user id is `.badSignature` (as with "006", whose
    /// signature covers the user id).
    @discardableResult
    public static func verifyRTMToken(
        _ token: String, appId: String, appCertificate: String, userId: String, now: UInt32
    ) throws(TokenError) -> UInt32 {
        if token.isEmpty { throw TokenError(.malformed, "no token given, and the app requires one") }
        let contents = try parse(token)
        guard contents.appId == appId else {
            throw TokenError(.wrongApp, "token is for app id '\(contents.appId)', not '\(appId)'")
        }
        let expected = sign(appCertificate: appCertificate, issueTs: contents.issueTs, salt: contents.salt,
                            signingInfo: contents.signingInfo)
        guard constantTimeEqual(expected, contents.signature) else {
            throw TokenError(.badSignature, "signature does not match (wrong app certificate, or the token was altered)")
        }
        guard let rtm = contents.rtm else {
            throw TokenError(.noPrivilege, "token has no RTM service (type \(rtmServiceType)); it has services \(contents.serviceTypes)")
        }
        guard rtm.userId == userId else {
            throw TokenError(.badSignature, "token is for user id '\(rtm.userId)', not '\(userId)'")
        }
        guard let privilege = rtm.privileges[rtmLoginPrivilege] else {
            throw TokenError(.noPrivilege, "token has no RTM login privilege (\(rtmLoginPrivilege))")
        }
        let tokenEnd = contents.expiresAt
        if tokenEnd < now {
            throw TokenError(.expired, "token expired at \(tokenEnd) (issued \(contents.issueTs), valid \(contents.expire) s; now \(now))")
        }
        guard privilege != 0 else { return tokenEnd }
        let privilegeEnd = UInt32(clamping: UInt64(contents.issueTs) + UInt64(privilege))
        if privilegeEnd < now {
            throw TokenError(.expired, "RTM login privilege expired at \(privilegeEnd) (issued \(contents.issueTs), valid \(privilege) s; now \(now))")
        }
        return min(tokenEnd, privilegeEnd)
    }

    /// The signing key chain and signature of the reference implementation.
    private static func sign(appCertificate: String, issueTs: UInt32, salt: UInt32, signingInfo: [UInt8]) -> [UInt8] {
        var issueTsBytes = Packer()
        issueTsBytes.uint32(issueTs)
        var saltBytes = Packer()
        saltBytes.uint32(salt)
        let first = HMAC<SHA256>.authenticationCode(for: Array(appCertificate.utf8), using: SymmetricKey(data: issueTsBytes.bytes))
        let signing = HMAC<SHA256>.authenticationCode(for: Array(first), using: SymmetricKey(data: saltBytes.bytes))
        return Array(HMAC<SHA256>.authenticationCode(for: signingInfo, using: SymmetricKey(data: Array(signing))))
    }

    private static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    /// What follows a service's privileges, for the service types of the reference implementation.
    private struct ServiceLayout {
        /// Number of strings (RTC/streaming: channel name and uid; RTM/chat: user id; education:
        /// room and user uuid).
        var strings: Int
        /// Education's trailing int16 role.
        var hasRole = false

        init?(type: UInt16) {
            switch type {
            case 1, 3: strings = 2
            case 2, 5: strings = 1
            case 4: strings = 0
            case 7: strings = 2; hasRole = true
            default: return nil
            }
        }
    }
}

extension Unpacker {
    /// A uint16 count, then that many (uint16 key, uint32 value) pairs.
    fileprivate mutating func privileges() -> [UInt16: UInt32]? {
        guard let count = uint16() else { return nil }
        var result: [UInt16: UInt32] = [:]
        for _ in 0..<count {
            guard let key = uint16(), let value = uint32() else { return nil }
            result[key] = value
        }
        return result
    }
}

/// zlib streams (RFC 1950) through the system zlib, at its default level like the reference
/// builders, so that built tokens are byte-identical to theirs.
enum Zlib {
    static func compress(_ input: [UInt8]) -> [UInt8] {
        var length = compressBound(uLong(input.count))
        var output = [UInt8](repeating: 0, count: Int(length))
        let status = output.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer { source in
                compress2(out.baseAddress, &length, source.baseAddress, uLong(source.count), Z_DEFAULT_COMPRESSION)
            }
        }
        // Only fails without memory: the output buffer is large enough by construction.
        precondition(status == Z_OK, "zlib compress2 failed (\(status))")
        return Array(output.prefix(Int(length)))
    }

    static func decompress(_ input: [UInt8], limit: Int) throws(TokenError) -> [UInt8] {
        var capacity = min(4096, limit)
        while true {
            var length = uLongf(capacity)
            var output = [UInt8](repeating: 0, count: capacity)
            let status = output.withUnsafeMutableBufferPointer { out in
                input.withUnsafeBufferPointer { source in
                    uncompress(out.baseAddress, &length, source.baseAddress, uLong(source.count))
                }
            }
            switch status {
            case Z_OK:
                return Array(output.prefix(Int(length)))
            case Z_BUF_ERROR where capacity < limit:
                capacity = min(capacity * 16, limit)
            case Z_BUF_ERROR:
                throw TokenError(.malformed, "token content is larger than \(limit) bytes once decompressed")
            default:
                throw TokenError(.malformed, "token content is not a valid zlib stream")
            }
        }
    }
}
