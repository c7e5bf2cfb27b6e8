import Crypto
import Foundation

/// AccessToken version "006" RTM login tokens, byte-compatible with the reference token builders
/// (AgoraIO/Tools, `DynamicKey/AgoraDynamicKey`, `AccessToken` + `RtmTokenBuilder`), so that
/// existing token servers keep working.
///
/// Layout: `"006" + appId + base64(content)` where
/// - `message   = uint32 salt, uint32 ts, map<uint16 privilege, uint32 expireTs>` (little endian,
///   map sorted by privilege, prefixed by a uint16 count),
/// - `signature = HMAC-SHA256(key: appCertificate, appId + channelName + uid + message)`,
/// - `content   = string signature, uint32 crc32(channelName), uint32 crc32(uid), string message`
///   (a string is a uint16 length then the bytes).
///
/// For RTM the user id takes the channel-name slot and the uid is empty; privilege 1000 is
/// "RTM login" and carries its expiry (0 = no expiry of the privilege). `ts` is the token's own
/// validity (the builders set it to now + 24 h).
///
/// ```swift
/// let token = AccessToken006.buildRTMToken(appId: appId, appCertificate: cert, userId: "alice",
///                                          privilegeExpireTimestamp: now + 3600)
/// let expiry = try AccessToken006.verifyRTMToken(token, appId: appId, appCertificate: cert,
///                                                userId: "alice", now: now)
/// ```
public enum AccessToken006 {
    /// The version prefix.
    public static let version = "006"
    /// Privilege number of "RTM login".
    public static let rtmLoginPrivilege: UInt16 = 1000
    /// The token's own validity set by the builders: 24 h.
    public static let tokenValiditySeconds: UInt32 = 24 * 3600

    /// The decoded parts of a token.
    public struct Contents: Sendable, Equatable {
        /// The app id in clear text after the version.
        public var appId: String
        /// HMAC-SHA256 signature (32 bytes).
        public var signature: [UInt8]
        /// CRC-32 of the channel name (for RTM: the user id).
        public var crcChannelName: UInt32
        /// CRC-32 of the uid (for RTM: of the empty string).
        public var crcUid: UInt32
        /// Random salt.
        public var salt: UInt32
        /// The token's own expiry (Unix seconds).
        public var ts: UInt32
        /// privilege → expiry (Unix seconds; 0 = the privilege does not expire).
        public var privileges: [UInt16: UInt32]
        /// The packed message, exactly as signed.
        var message: [UInt8]
    }

    /// Builds an RTM token for `userId`; `salt` and `ts` default as in the reference builders
    /// (random, and now + 24 h).
    public static func buildRTMToken(
        appId: String, appCertificate: String, userId: String, privilegeExpireTimestamp: UInt32,
        salt: UInt32 = UInt32.random(in: 1...99_999_999), ts: UInt32? = nil
    ) -> String {
        let ts = ts ?? UInt32(clamping: Int(Date().timeIntervalSince1970)) &+ tokenValiditySeconds
        return build(appId: appId, appCertificate: appCertificate, channelName: userId, uid: "",
                     salt: salt, ts: ts, privileges: [rtmLoginPrivilege: privilegeExpireTimestamp])
    }

    /// Builds a "006" token for any channel name, uid and privileges (the general form).
    public static func build(
        appId: String, appCertificate: String, channelName: String, uid: String,
        salt: UInt32, ts: UInt32, privileges: [UInt16: UInt32]
    ) -> String {
        var message = Packer()
        message.uint32(salt)
        message.uint32(ts)
        message.uint16(UInt16(privileges.count))
        for (privilege, expiry) in privileges.sorted(by: { $0.key < $1.key }) {
            message.uint16(privilege)
            message.uint32(expiry)
        }
        let signature = sign(appId: appId, appCertificate: appCertificate, channelName: channelName, uid: uid, message: message.bytes)
        var content = Packer()
        content.string(signature)
        content.uint32(CRC32.checksum(Array(channelName.utf8)))
        content.uint32(CRC32.checksum(Array(uid.utf8)))
        content.string(message.bytes)
        return version + appId + Data(content.bytes).base64EncodedString()
    }

    /// Parses a token without checking its signature.
    public static func parse(_ token: String) throws(TokenError) -> Contents {
        guard token.hasPrefix(version) else {
            throw TokenError(.malformed, "not an AccessToken \(version) token (it starts with '\(token.prefix(3))')")
        }
        let afterVersion = token.dropFirst(version.count)
        guard afterVersion.count > 32 else { throw TokenError(.malformed, "token too short") }
        let appId = String(afterVersion.prefix(32))
        guard let content = Data(base64Encoded: String(afterVersion.dropFirst(32))) else {
            throw TokenError(.malformed, "token content is not base64")
        }
        var reader = Unpacker(Array(content))
        guard let signature = reader.string(), let crcChannel = reader.uint32(), let crcUid = reader.uint32(),
              let message = reader.string() else {
            throw TokenError(.malformed, "token content is truncated")
        }
        var fields = Unpacker(message)
        guard let salt = fields.uint32(), let ts = fields.uint32(), let count = fields.uint16() else {
            throw TokenError(.malformed, "token message is truncated")
        }
        var privileges: [UInt16: UInt32] = [:]
        for _ in 0..<count {
            guard let key = fields.uint16(), let value = fields.uint32() else {
                throw TokenError(.malformed, "token privileges are truncated")
            }
            privileges[key] = value
        }
        return Contents(appId: appId, signature: signature, crcChannelName: crcChannel, crcUid: crcUid,
                        salt: salt, ts: ts, privileges: privileges, message: message)
    }

    /// Verifies an RTM login token for `userId` at time `now` (Unix seconds). Returns the login
    /// privilege's expiry (0 = none). Throws a `TokenError` saying what is wrong.
    @discardableResult
    public static func verifyRTMToken(
        _ token: String, appId: String, appCertificate: String, userId: String, now: UInt32
    ) throws(TokenError) -> UInt32 {
        if token.isEmpty { throw TokenError(.malformed, "no token given, and the app requires one") }
        let contents = try parse(token)
        guard contents.appId == appId else {
            throw TokenError(.wrongApp, "token is for app id '\(contents.appId)', not '\(appId)'")
        }
        let expected = sign(appId: appId, appCertificate: appCertificate, channelName: userId, uid: "", message: contents.message)
        guard constantTimeEqual(expected, contents.signature) else {
            throw TokenError(.badSignature, "signature does not match (wrong certificate, or a token for another user id than '\(userId)')")
        }
        guard let expiry = contents.privileges[rtmLoginPrivilege] else {
            throw TokenError(.noPrivilege, "token has no RTM login privilege (\(rtmLoginPrivilege))")
        }
        if contents.ts < now {
            throw TokenError(.expired, "token expired at \(contents.ts) (now \(now))")
        }
        if expiry != 0 && expiry < now {
            throw TokenError(.expired, "RTM login privilege expired at \(expiry) (now \(now))")
        }
        return expiry
    }

    private static func sign(appId: String, appCertificate: String, channelName: String, uid: String, message: [UInt8]) -> [UInt8] {
        var signed = Array(appId.utf8)
        signed += Array(channelName.utf8)
        signed += Array(uid.utf8)
        signed += message
        let key = SymmetricKey(data: Array(appCertificate.utf8))
        return Array(HMAC<SHA256>.authenticationCode(for: signed, using: key))
    }

    private static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// Why a token was refused.
public struct TokenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of problem.
    public enum Kind: Sendable, Equatable {
        /// Not a token of this version, truncated, or not base64.
        case malformed
        /// Made for another app id.
        case wrongApp
        /// The signature does not verify.
        case badSignature
        /// No RTM login privilege in it.
        case noPrivilege
        /// Past its expiry.
        case expired
    }
    /// The kind of problem.
    public let kind: Kind
    /// What exactly is wrong.
    public let reason: String
    /// Creates an error.
    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
    /// The reason.
    public var description: String { reason }
}
