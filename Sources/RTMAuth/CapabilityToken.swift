import Crypto
import Foundation

/// The capability token: a JSON Web Token (RFC 7519), signed with HS256 by the app's
/// certificate, that tells the server what one user's session may do (`Capabilities`). The
/// app's backend mints it beside the login token, with `rtm token --capability` or any JWT
/// library; the SDK passes it at login (and at `renewToken`, to change it).
///
/// It is a second token, not a field of the login token, so that the reference services'
/// token builders (AccessToken "006" and "007", whose layouts have no place for it) keep
/// working unchanged, and so that a backend can mint it with the JWT library it already has.
///
/// Claims: `aud` the app id, `sub` the user id, `exp` (optional) when it stops being accepted,
/// and `rtm`, the grants:
///
/// ```json
/// {"aud": "<app id>", "sub": "alice", "exp": 1798761600,
///  "rtm": {"channels": {"room.*": ["subscribe", "publish", "presence"]},
///          "users": {"*": ["send", "status"]}}}
/// ```
///
/// Only HS256 is accepted (a token naming another algorithm, `none` included, is refused).
/// The server verifies it synchronously on the connection's event loop, a handful of lines
/// over swift-crypto's HMAC, which is why it does not pull in a JWT library whose key
/// collection is asynchronous.
public enum CapabilityToken {
    /// Mints a capability token for `userId` of `appId`, signed with `appCertificate`.
    /// `expiresAt`: Unix seconds (nil: no expiry); `issuedAt` goes in `iat`.
    public static func mint(_ capabilities: Capabilities, appId: String, userId: String, appCertificate: String,
                            issuedAt: UInt32, expiresAt: UInt32?) -> String {
        var claims: [String: Any] = ["aud": appId, "sub": userId, "iat": Int(issuedAt), "rtm": grantsJSON(capabilities)]
        if let expiresAt { claims["exp"] = Int(expiresAt) }
        let header = base64URL(json(["alg": "HS256", "typ": "JWT"]))
        let signingInput = header + "." + base64URL(json(claims))
        return signingInput + "." + base64URL(Data(signature(signingInput, certificate: appCertificate)))
    }

    /// Verifies `token` for `userId` of `appId` at `now` (Unix seconds) and returns its grants.
    /// With `appCertificate` nil (an app without a certificate, whose logins need no token)
    /// the signature cannot be checked and is not: the grants can only narrow what the
    /// session could do anyway. Throws a `TokenError` saying what is wrong.
    public static func verify(_ token: String, appId: String, userId: String, appCertificate: String?,
                              now: UInt32) throws(TokenError) -> VerifiedCapabilities {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw TokenError(.malformed, "a capability token is a JWT: three base64url parts separated by '.'")
        }
        guard let header = object(parts[0]) else { throw TokenError(.malformed, "the capability token's header is not base64url JSON") }
        guard header["alg"] as? String == "HS256" else {
            throw TokenError(.malformed, "the capability token's algorithm is '\(header["alg"] ?? "missing")'; only HS256 is accepted")
        }
        if let certificate = appCertificate {
            // swift-crypto's check compares in constant time.
            guard let given = base64URLDecode(parts[2]),
                  HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: Array((String(parts[0]) + "." + String(parts[1])).utf8),
                                                         using: key(certificate)) else {
                throw TokenError(.badSignature, "the capability token's signature does not verify with the app's certificate")
            }
        }
        guard let claims = object(parts[1]) else { throw TokenError(.malformed, "the capability token's claims are not base64url JSON") }
        let audience: [String] = (claims["aud"] as? String).map { [$0] } ?? (claims["aud"] as? [String]) ?? []
        guard audience.contains(appId) else {
            throw TokenError(.wrongApp, "the capability token is for app \(audience.first.map { "'\($0)'" } ?? "(no aud claim)"), not this one")
        }
        guard let subject = claims["sub"] as? String, subject == userId else {
            throw TokenError(.malformed, "the capability token is for user '\(claims["sub"] as? String ?? "(no sub claim)")', not '\(userId)'")
        }
        var expiresAt: UInt32?
        if let exp = claims["exp"] {
            guard let seconds = (exp as? NSNumber)?.doubleValue, seconds.isFinite, seconds >= 0 else {
                throw TokenError(.malformed, "the capability token's exp claim is not a number of seconds")
            }
            guard seconds > Double(now) else { throw TokenError(.expired, "the capability token expired at \(Int(seconds))") }
            expiresAt = UInt32(clamping: Int(seconds))
        }
        if let nbf = (claims["nbf"] as? NSNumber)?.doubleValue, nbf > Double(now) {
            throw TokenError(.malformed, "the capability token is not valid before \(Int(nbf))")
        }
        // When it was issued orders a session's capability tokens: an older one never widens a
        // narrowed session again (a renewal or a stream join with it is refused).
        guard let iat = claims["iat"] else {
            throw TokenError(.malformed, "the capability token has no iat claim (when it was issued, Unix seconds): it is required")
        }
        guard let issued = (iat as? NSNumber)?.doubleValue, issued.isFinite, issued >= 0 else {
            throw TokenError(.malformed, "the capability token's iat claim is not a number of seconds")
        }
        guard let grants = claims["rtm"] as? [String: Any] else {
            throw TokenError(.malformed, "the capability token has no 'rtm' claim (its grants)")
        }
        return VerifiedCapabilities(capabilities: try capabilities(grants), expiresAt: expiresAt,
                                    issuedAt: UInt32(clamping: Int(issued)))
    }

    /// Grants in the JSON form of the token's `rtm` claim (`{"channels": {"room.*":
    /// ["subscribe"]}, "users": {"*": ["send"]}}`), as decoded by `JSONSerialization`; the
    /// authorization hook's `connect` answer carries them in this form too.
    public static func grants(fromJSON object: Any) throws(TokenError) -> Capabilities {
        guard let grants = object as? [String: Any] else {
            throw TokenError(.malformed, "the grants must be an object with 'channels' and/or 'users'")
        }
        return try capabilities(grants)
    }

    // MARK: helpers

    private static func capabilities(_ grants: [String: Any]) throws(TokenError) -> Capabilities {
        for key in grants.keys where key != "channels" && key != "users" {
            throw TokenError(.malformed, "unknown key '\(key)' in the capability token's 'rtm' claim (channels, users)")
        }
        func map<Operation: RawRepresentable & CaseIterable & Hashable>(_ key: String, _: Operation.Type)
            throws(TokenError) -> [String: Set<Operation>] where Operation.RawValue == String {
            guard let value = grants[key] else { return [:] }
            guard let patterns = value as? [String: Any] else {
                throw TokenError(.malformed, "'rtm.\(key)' must map patterns to lists of operations")
            }
            var result: [String: Set<Operation>] = [:]
            for (pattern, operations) in patterns {
                if let problem = Capabilities.patternProblem(pattern) { throw TokenError(.malformed, "rtm.\(key): \(problem)") }
                guard let names = operations as? [String] else {
                    throw TokenError(.malformed, "'rtm.\(key).\(pattern)' must be a list of operation names")
                }
                result[pattern] = try Capabilities.operations(names, in: pattern)
            }
            return result
        }
        return Capabilities(channels: try map("channels", Capabilities.ChannelOperation.self),
                            users: try map("users", Capabilities.UserOperation.self))
    }

    private static func grantsJSON(_ capabilities: Capabilities) -> [String: Any] {
        var grants: [String: Any] = [:]
        if !capabilities.channels.isEmpty {
            grants["channels"] = Dictionary(uniqueKeysWithValues: capabilities.channels.map { ($0.pattern, $0.operations.sorted().map(\.rawValue)) })
        }
        if !capabilities.users.isEmpty {
            grants["users"] = Dictionary(uniqueKeysWithValues: capabilities.users.map { ($0.pattern, $0.operations.sorted().map(\.rawValue)) })
        }
        return grants
    }

    private static func signature(_ input: String, certificate: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: key(certificate)))
    }

    /// The HS256 key: the app certificate's bytes.
    private static func key(_ certificate: String) -> SymmetricKey {
        SymmetricKey(data: Array(certificate.utf8))
    }

    private static func json(_ object: [String: Any]) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    }

    private static func object(_ part: Substring) -> [String: Any]? {
        base64URLDecode(part).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func base64URLDecode(_ part: Substring) -> Data? {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !text.contains("=") else { return nil }
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        return Data(base64Encoded: text)
    }
}

/// A capability token `CapabilityToken.verify` accepted.
public struct VerifiedCapabilities: Sendable, Equatable {
    /// What it grants.
    public var capabilities: Capabilities
    /// When it stops being accepted (Unix seconds); nil = never. The session it was given to
    /// ends then, as at its login token's expiry, unless a renewal brings a new one.
    public var expiresAt: UInt32?
    /// When it was issued (its `iat` claim, Unix seconds): a session's grants never go back to
    /// those of a token issued before its current one.
    public var issuedAt: UInt32
}
