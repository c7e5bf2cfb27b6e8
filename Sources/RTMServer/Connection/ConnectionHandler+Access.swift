import Foundation
import NIOCore
import RTMAuth
import RTMProtocol

/// The session's access (`SessionAccess`) from the connection's side: the tokens of a login, a
/// join or a renewal (verified by the gate), the grants they give, and the one pass that decides
/// every watch of the session again when its grants or the server's rules change.
extension ConnectionHandler {
    /// A login's, join's or renewToken's tokens, verified: the gate's decision for them. A
    /// renewal names no app or user: the session's are used.
    func credentials(_ frame: Frame) -> Result<Credentials, RequestRefusal> {
        let config = hub.configuration
        let appId: String, userId: String
        if let held = lifecycle.session ?? stream.map({ UserKey(appId: $0.channel.appId, userId: $0.userId) }) {
            (appId, userId) = (held.appId, held.userId)
        } else {
            guard let app = frame.appId, let user = frame.userId else {
                return .failure(RequestRefusal(code: .invalidParameter, reason: "\(frame.type) needs appId and userId"))
            }
            guard config.apps[app] != nil else { return .failure(RequestRefusal(code: .invalidAppId, reason: "unknown app id '\(app)'")) }
            if let problem = config.limits.nameProblem(user, kind: "userId") { return .failure(RequestRefusal(code: .invalidUserId, reason: problem)) }
            (appId, userId) = (app, user)
        }
        let certificate = config.apps[appId] ?? nil
        let now = UInt32(clamping: Int(Date().timeIntervalSince1970))
        var verified = Credentials()
        if let certificate {
            do throws(TokenError) {
                let token = try RTMToken.verify(frame.token ?? "", appId: appId, appCertificate: certificate, userId: userId, now: now)
                verified.tokenExpiry = token.expiresAt.map { Int64($0) * 1000 }
                // The same instant as the session's expiry timer, to the millisecond.
                if let expiresAt = verified.tokenExpiry, expiresAt <= Hub.wallMillis {
                    throw TokenError(.expired, "token expired at \(expiresAt / 1000)")
                }
            } catch {
                return .failure(RequestRefusal(code: error.kind == .expired ? .tokenExpired : .invalidToken, reason: "token rejected: \(error.reason)"))
            }
        }
        if let token = frame.capability {
            do throws(TokenError) {
                let capability = try CapabilityToken.verify(token, appId: appId, userId: userId, appCertificate: certificate, now: now)
                verified.capabilities = capability.capabilities
                verified.capabilityExpiry = capability.expiresAt.map { Int64($0) * 1000 }
                verified.issuedAt = capability.issuedAt
            } catch {
                return .failure(RequestRefusal(code: error.kind == .expired ? .tokenExpired : .invalidToken,
                                               reason: "capability token rejected: \(error.reason)"))
            }
        }
        return .success(verified)
    }

    /// A renewal's capability token issued before the session's current one: refused, so that
    /// a session's grants never go back to an older token's (however long it is valid).
    func olderToken(_ credentials: Credentials) -> RequestRefusal? {
        guard let issued = credentials.issuedAt else { return nil }   // no capability token: the grants stay
        return SessionAccess.goingBack(issued: issued, current: access?.issuedAt, of: "the session's")
    }

    /// A join's access: its capability token's grants (refused when issued before those of its
    /// user's MESSAGE session), or without one its MESSAGE session's grants, never none.
    func streamAccess(_ frame: Frame, credentials: Credentials) -> Result<SessionAccess, RequestRefusal> {
        guard let appId = frame.appId, let userId = frame.userId else {
            return .failure(RequestRefusal(code: .invalidParameter, reason: "join needs appId and userId"))
        }
        guard let channel = frame.channel else {
            return .failure(RequestRefusal(code: .invalidChannelName, reason: "'join' needs a channel"))
        }
        if let problem = hub.configuration.limits.nameProblem(channel, kind: "channel name") {
            return .failure(RequestRefusal(code: .invalidChannelName, reason: problem))
        }
        let session = hub.connection(of: UserKey(appId: appId, userId: userId))?.sessionAccess
        guard let capabilities = credentials.capabilities else {
            guard let session else { return .success(makeAccess(userId: userId, credentials: credentials)) }
            return .success(makeAccess(userId: userId, capabilities: session.capabilities, expiry: session.capabilityExpiry,
                                       issuedAt: session.issuedAt, source: session.source))
        }
        if let refusal = SessionAccess.goingBack(issued: credentials.issuedAt, current: session?.issuedAt, of: "'\(userId)'s session's") {
            return .failure(refusal)
        }
        return .success(makeAccess(userId: userId, capabilities: capabilities, expiry: credentials.capabilityExpiry,
                                   issuedAt: credentials.issuedAt, source: .token))
    }

    /// The access verified credentials give: the capability token's grants, or the server's
    /// default capability when they carry none.
    func makeAccess(userId: String, credentials: Credentials) -> SessionAccess {
        makeAccess(userId: userId, capabilities: credentials.capabilities, expiry: credentials.capabilityExpiry,
                   issuedAt: credentials.issuedAt, source: credentials.capabilities == nil ? .serverDefault : .token)
    }

    /// A session's access under the server's current rules; `source` `.serverDefault` takes the
    /// current default capability.
    func makeAccess(userId: String, capabilities: Capabilities?, expiry: Int64?, issuedAt: UInt32?,
                    source: SessionAccess.GrantSource) -> SessionAccess {
        let rules = hub.accessRules.current
        return SessionAccess(userId: userId, capabilities: source == .serverDefault ? rules.defaultCapabilities : capabilities,
                             namespaces: rules.namespaces, capabilityExpiry: expiry, issuedAt: issuedAt, source: source,
                             hooksPublishes: hub.authorizationHook != nil && rules.namespaces.contains { $0.hooks.contains(.publish) })
    }

    /// The earlier of two expiries (ms; nil = never).
    static func earlier(_ a: Int64?, _ b: Int64?) -> Int64? {
        switch (a, b) {
        case let (a?, b?): min(a, b)
        case let (a?, nil): a
        case let (nil, b): b
        }
    }

    /// The server's namespaces or default capability were reloaded: the session takes them,
    /// and every watch they no longer allow ends.
    func accessRulesChanged() {
        guard let current = access else { return }
        adopt(makeAccess(userId: current.userId, capabilities: current.capabilities, expiry: current.capabilityExpiry,
                         issuedAt: current.issuedAt, source: current.source))
    }

    /// The user's MESSAGE session renewed its capability token: this STREAM connection takes
    /// the new grants too.
    func streamGrantsChanged(_ access: SessionAccess) {
        guard let current = self.access else { return }
        adopt(makeAccess(userId: current.userId, capabilities: access.capabilities, expiry: access.capabilityExpiry,
                         issuedAt: access.issuedAt, source: access.source))
    }

    /// New grants for the session or STREAM membership (a renewal, its MESSAGE session's, or
    /// reloaded rules): adopted, then every watch decided again, in one pass, with the request
    /// decision that started it (`SessionAccess.refusal(toKeep:)`). What no longer holds ends,
    /// and the client is told: a subscription with `unsubscribed`, a part of one or another watch
    /// with `watchEnded` (both -10104 with the reason), a STREAM connection whose channel is no
    /// longer granted with close 1008.
    func adopt(_ access: SessionAccess) {
        lifecycle.grant(access)
        intake.passedChannel = nil
        guard let context, lifecycle.maySend else { return }
        if let key = lifecycle.session {
            connection.sessionAccess = access
            hub.grantsChanged(key, issuedAt: access.issuedAt)
            // Its STREAM connections take the grants too.
            for stream in hub.streams.connections(of: key) {
                stream.withHandler { $0.streamGrantsChanged(access) }
            }
            // Unrestricted grants end nothing: the watches are decided again only when some may fail.
            if !access.isUnrestricted { endForbiddenWatches(key: key, access: access, context: context) }
        } else if let membership = stream, !access.isUnrestricted {
            endForbiddenStreamWatches(membership, access: access, context: context)
        }
    }

    /// A MESSAGE session's watches, decided again.
    func endForbiddenWatches(key: UserKey, access: SessionAccess, context: ChannelHandlerContext) {
        for channel in localChannels.sorted() {
            let channelKey = ChannelKey(appId: key.appId, name: channel)
            let features = fanout.features(of: connection, in: channelKey) ?? .presence
            guard let refusal = access.refusal(toKeep: .subscription(channel: channel, features: [])) else {
                // The subscription holds: each of its parts must too.
                var kept = features
                for part in [ChannelFeatures.presence, .metadata, .lock] where features.contains(part) {
                    guard let refusal = access.refusal(toKeep: .subscription(channel: channel, features: part)) else { continue }
                    kept.remove(part)
                    send(Self.watchEnded(part.watchName, channel: channel, refusal: refusal), context: context)
                }
                if kept != features {
                    _ = hub.subscribe(connection, channel: channel, quiet: true, features: kept)
                    joinFanout(channel, appId: key.appId, features: kept)
                }
                continue
            }
            leaveFanout(channel, appId: key.appId)
            _ = hub.unsubscribe(connection, channel: channel)
            send(Frame(type: .unsubscribed, channel: channel, code: refusal.code.rawValue, reason: refusal.reason), context: context)
        }
        let watches = hub.watches(of: key)
        for user in watches.metadata.sorted() {
            guard let refusal = access.refusal(toKeep: .userMetadata(user)) else { continue }
            hub.watchMetadata(of: UserKey(appId: key.appId, userId: user), watcher: key.userId, on: false)
            send(Self.watchEnded("userMetadata", userId: user, refusal: refusal), context: context)
        }
        let ended = watches.peers.sorted().compactMap { user in access.refusal(toKeep: .peerStatus(user)).map { (user, $0) } }
        if !ended.isEmpty {
            hub.endPeerWatches(key, users: ended.map(\.0))
            for (user, refusal) in ended { send(Self.watchEnded("peerStatus", userId: user, refusal: refusal), context: context) }
        }
    }

    /// A STREAM connection's watches, decided again: its channel (closed with 1008 when no
    /// longer granted; its client's rejoin is then refused for good), its metadata and lock
    /// parts, and the topics it publishes to.
    private func endForbiddenStreamWatches(_ membership: StreamMembership, access: SessionAccess, context: ChannelHandlerContext) {
        let channel = membership.channel.name
        if let refusal = access.refusal(toKeep: .stream(channel: channel, features: [])) {
            return closeConnection(context: context, code: .policyViolation, reason: String(refusal.reason.utf8.prefix(120)) ?? "not permitted")
        }
        let services = hub.streams.services(of: membership)
        var kept = services
        for part in [ChannelFeatures.metadata, .lock] where services.contains(part) {
            guard let refusal = access.refusal(toKeep: .stream(channel: channel, features: part)) else { continue }
            kept.remove(part)
            send(Self.watchEnded(part.watchName, channel: channel, refusal: refusal).with { $0.channelType = "stream" }, context: context)
        }
        let left = hub.streams.grantsChanged(membership, services: kept) { topic in
            access.refusal(toKeep: .topic(streamChannel: channel, topic: topic))
        }
        for (topic, refusal) in left {
            send(Self.watchEnded("topic", channel: channel, refusal: refusal).with {
                $0.channelType = "stream"
                $0.topic = topic
            }, context: context)
        }
    }

    /// The `watchEnded` event: a watch (`event` names its kind) the session's grants no longer
    /// allow ended.
    static func watchEnded(_ watch: String, channel: String? = nil, userId: String? = nil, refusal: RequestRefusal) -> Frame {
        Frame(type: .watchEnded, userId: userId, channel: channel, event: watch, code: refusal.code.rawValue, reason: refusal.reason)
    }
}

extension ChannelFeatures {
    /// The part's name in a `watchEnded` event.
    var watchName: String {
        switch self {
        case .metadata: "metadata"
        case .lock: "lock"
        default: "presence"
        }
    }
}
