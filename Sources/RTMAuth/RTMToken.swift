/// The server's single entry point for RTM login tokens: accepts AccessToken "006" and
/// AccessToken2 "007", dispatching on the version prefix.
///
/// ```swift
/// let verified = try RTMToken.verify(token, appId: appId, appCertificate: cert, userId: "alice", now: now)
/// if let end = verified.expiresAt { scheduleKick(at: end) }
/// ```
public enum RTMToken {
    /// The token versions `verify` accepts.
    public static let supportedVersions = [AccessToken006.version, AccessToken2.version]

    /// Verifies an RTM login token of either version for `userId` at time `now` (Unix seconds).
    /// Throws a `TokenError` saying what is wrong (`.expired` when past its expiry).
    public static func verify(
        _ token: String, appId: String, appCertificate: String, userId: String, now: UInt32
    ) throws(TokenError) -> VerifiedRTMToken {
        if token.isEmpty { throw TokenError(.malformed, "no token given, and the app requires one") }
        if token.hasPrefix(AccessToken006.version) {
            let expiry = try AccessToken006.verifyRTMToken(token, appId: appId, appCertificate: appCertificate,
                                                           userId: userId, now: now)
            return VerifiedRTMToken(version: AccessToken006.version, expiresAt: expiry == 0 ? nil : expiry)
        }
        if token.hasPrefix(AccessToken2.version) {
            let expiry = try AccessToken2.verifyRTMToken(token, appId: appId, appCertificate: appCertificate,
                                                         userId: userId, now: now)
            return VerifiedRTMToken(version: AccessToken2.version, expiresAt: expiry)
        }
        throw TokenError(.malformed, "unsupported token version '\(token.prefix(3))' (expected one of \(supportedVersions.joined(separator: ", ")))")
    }
}

/// A token `RTMToken.verify` accepted.
public struct VerifiedRTMToken: Sendable, Equatable {
    /// The token's version: "006" or "007".
    public var version: String
    /// When the login privilege ends (Unix seconds); nil = never. For "006" this is the login
    /// privilege's expiry (its `ts` only bounds when the token can be used to log in); for "007"
    /// the earlier of the token's and the login privilege's ends.
    public var expiresAt: UInt32?

    /// Creates a result.
    public init(version: String, expiresAt: UInt32?) {
        self.version = version
        self.expiresAt = expiresAt
    }
}
