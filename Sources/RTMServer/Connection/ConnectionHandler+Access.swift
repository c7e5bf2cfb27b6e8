import Foundation
import NIOCore
import RTMAuth
import RTMProtocol

/// The session's access (`SessionAccess`): its capability token, read at login, join and
/// renewToken, and what a narrower one ends.
extension ConnectionHandler {
    /// The capability token's grants and expiry (ms) of a `login`, `join` or `renewToken`
    /// (nil grants: the frame carries none). On failure the error is sent.
    func verifyCapability(_ frame: Frame, appId: String, userId: String, certificate: String?,
                          context: ChannelHandlerContext) -> Result<(Capabilities?, Int64?), TokenError> {
        guard let token = frame.capability else { return .success((nil, nil)) }
        let now = UInt32(clamping: Int(Date().timeIntervalSince1970))
        do throws(TokenError) {
            let verified = try CapabilityToken.verify(token, appId: appId, userId: userId, appCertificate: certificate, now: now)
            return .success((verified.capabilities, verified.expiresAt.map { Int64($0) * 1000 }))
        } catch {
            let code: RTMErrorCode = error.kind == .expired ? .tokenExpired : .invalidToken
            send(.error(id: frame.id, code, "capability token rejected: \(error.reason)"), context: context)
            return .failure(error)
        }
    }

    /// The session's access from its verified capability (nil: none).
    func makeAccess(userId: String, capabilities: Capabilities?, expiry: Int64?) -> SessionAccess {
        let namespaces = hub.namespaces.current
        return SessionAccess(userId: userId, capabilities: capabilities, namespaces: namespaces, capabilityExpiry: expiry,
                             hooksPublishes: hub.authorizationHook != nil && namespaces.contains { $0.hooks.contains(.publish) })
    }

    /// The earlier of two expiries (ms; nil = never).
    static func earlier(_ a: Int64?, _ b: Int64?) -> Int64? {
        switch (a, b) {
        case let (a?, b?): min(a, b)
        case let (a?, nil): a
        case let (nil, b): b
        }
    }

    /// The server's namespaces were reloaded: the session takes them, and what they no longer
    /// allow ends as a narrower capability token's would (its subscriptions with
    /// `unsubscribed`; a STREAM connection is closed).
    func namespacesChanged() {
        guard let current = access, let context, lifecycle.maySend else { return }
        if let stream {
            let renewed = makeAccess(userId: stream.userId, capabilities: current.capabilities, expiry: current.capabilityExpiry)
            if let refusal = renewed.check(.streamJoin, stream.channel.name) {
                return closeConnection(context: context, code: .policyViolation, reason: String(refusal.reason.utf8.prefix(120)) ?? "not permitted")
            }
            lifecycle.grant(renewed)
        } else if let key = lifecycle.session {
            lifecycle.grant(makeAccess(userId: key.userId, capabilities: current.capabilities, expiry: current.capabilityExpiry))
            endForbiddenSubscriptions(key: key, context: context)
        }
    }

    /// The user's MESSAGE session renewed its capability token: this STREAM connection takes
    /// the new grants too, and ends (close 1008, `notPermitted`'s reason) when they no longer
    /// grant its channel; its client's rejoin is then refused for good.
    func streamGrantsChanged(_ capabilities: Capabilities, expiry: Int64?) {
        guard let stream, let context, lifecycle.maySend else { return }
        if let refusal = adoptStreamGrants(capabilities, expiry: expiry, membership: stream) {
            closeConnection(context: context, code: .policyViolation, reason: String(refusal.reason.utf8.prefix(120)) ?? "not permitted")
        }
    }

    /// New grants for this STREAM connection (its own renewal, or its user's MESSAGE one):
    /// adopted, or the refusal when they no longer grant its channel (`stream.join`), and the
    /// caller ends the connection.
    func adoptStreamGrants(_ capabilities: Capabilities, expiry: Int64?, membership: StreamMembership) -> RequestRefusal? {
        let renewed = makeAccess(userId: membership.userId, capabilities: capabilities, expiry: expiry)
        if let refusal = renewed.check(.streamJoin, membership.channel.name) { return refusal }
        lifecycle.grant(renewed)
        return nil
    }

    /// A renewal changed the session's grants: every subscription they no longer allow ends
    /// now, and the client is told (`unsubscribed`, -10104, with the reason), so that it does
    /// not subscribe again after a reconnection.
    func endForbiddenSubscriptions(key: UserKey, context: ChannelHandlerContext) {
        guard let access else { return }
        for channel in localChannels.sorted() {
            guard let refusal = access.check(.subscribe, channel) else { continue }
            leaveFanout(channel, appId: key.appId)
            _ = hub.unsubscribe(connection, channel: channel)
            send(Frame(type: .unsubscribed, channel: channel, code: refusal.code.rawValue, reason: refusal.reason), context: context)
        }
    }
}
