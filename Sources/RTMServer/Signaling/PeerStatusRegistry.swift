import NIOCore
import RTMProtocol

/// Who watches whose online status, and what was last reported (AGORA_REFERENCE §1.7). A plain
/// value inside `HubState` (so under the hub's one lock); the state of a user itself is not
/// stored here but derived from the session table (`HubState.peerState`): offline when there
/// is no session, unreachable when the session was found silent, online otherwise. That keeps
/// it in agreement with presence and the heartbeat rules (SPEC H-2, P-1): a user goes offline
/// exactly when its session ends (logout, or the grace window after its last sign of life).
struct PeerStatusRegistry {
    /// What a watcher is told: its peers that changed, at status version `version`.
    struct Notice {
        let watcher: UserKey
        let peers: [PeerOnlineStatus]
        let version: UInt64
    }

    /// Why a call was refused.
    typealias Refusal = RequestRefusal

    /// Bumped on every reported change; a watcher keeps the newest it saw per peer, so frames
    /// that overtake each other between threads never roll a status back.
    private(set) var version: UInt64 = 0
    /// Watched user → the users watching it.
    private var watchers: [UserKey: Set<String>] = [:]
    /// Watcher → the session its subscriptions belong to, and the users it watches.
    private var watching: [UserKey: (session: UInt64, targets: Set<String>)] = [:]
    /// Watched user → the state its watchers were last told.
    private var reported: [UserKey: PeerOnlineState] = [:]
    /// Users whose session was found silent past their unreachable threshold.
    private(set) var silent: Set<UserKey> = []
    /// The rate-limited kinds of call, each with its own budget per user.
    enum CallKind: Hashable {
        /// queryPeersOnlineStatus (10 per 5 s).
        case query
        /// subscribe / unsubscribePeersOnlineStatus (10 per 5 s).
        case subscription
        /// getChannelMemberCount (1 per second).
        case memberCount
    }

    private var limiters: [CallKind: [UserKey: RateLimiter]] = [:]

    let maxSubscribed: Int
    let maxPerCall: Int
    let ratePerSecond: Double
    let burst: Double
    let memberCountRate: Double

    init(configuration: ServerConfiguration) {
        maxSubscribed = configuration.peerStatusMaxSubscribed
        maxPerCall = configuration.peerStatusMaxUsersPerCall
        ratePerSecond = configuration.peerStatusRatePerSecond
        burst = configuration.peerStatusBurst
        memberCountRate = configuration.memberCountRatePerSecond
    }

    /// Whether `user` may make one more call of `kind` now.
    mutating func allow(_ user: UserKey, _ kind: CallKind, now: NIODeadline) -> Bool {
        var limiter = limiters[kind]?[user] ?? (kind == .memberCount ? RateLimiter(ratePerSecond: memberCountRate, burst: 1)
                                                                        : RateLimiter(ratePerSecond: ratePerSecond, burst: burst))
        let allowed = limiter.tryAcquire(now: now)
        limiters[kind, default: [:]][user] = limiter
        return allowed
    }

    /// Checks a call's user list: not empty, at most `maxPerCall`, valid ids.
    func check(_ users: [String], limits: Limits) -> Refusal? {
        guard !users.isEmpty else { return Refusal(code: .invalidParameter, reason: "'users' must list at least one user") }
        guard users.count <= maxPerCall else {
            return Refusal(code: .invalidParameter, reason: "\(users.count) users in one call; the limit is \(maxPerCall)")
        }
        for user in users {
            if let problem = limits.nameProblem(user, kind: "userId") { return Refusal(code: .invalidUserId, reason: problem) }
        }
        return nil
    }

    /// Adds `targets` to what `watcher` (in session `session`) watches; subscribing to a user
    /// already watched is not an error. `state` gives a user's state now.
    mutating func subscribe(_ watcher: UserKey, session: UInt64, targets: [String],
                            state: (UserKey) -> PeerOnlineState) -> Result<[PeerOnlineStatus], Refusal> {
        if watching[watcher]?.session != session { dropSubscriptions(of: watcher) }
        var entry: (session: UInt64, targets: Set<String>) = watching[watcher] ?? (session, [])
        let added = Set(targets).subtracting(entry.targets)
        guard entry.targets.count + added.count <= maxSubscribed else {
            return .failure(Refusal(code: .peerSubscriptionOverflow, reason:
                "\(entry.targets.count) peers subscribed, \(added.count) more would pass the limit of \(maxSubscribed)"))
        }
        entry.targets.formUnion(added)
        watching[watcher] = entry
        var peers: [PeerOnlineStatus] = []
        for target in Set(targets).sorted() {
            let key = UserKey(appId: watcher.appId, userId: target)
            watchers[key, default: []].insert(watcher.userId)
            let now = state(key)
            reported[key] = now
            peers.append(PeerOnlineStatus(userId: target, state: now))
        }
        return .success(peers)
    }

    /// Removes `targets` from what `watcher` watches.
    mutating func unsubscribe(_ watcher: UserKey, targets: [String]) {
        guard var entry = watching[watcher] else { return }
        for target in targets where entry.targets.remove(target) != nil {
            forget(watcher.userId, of: UserKey(appId: watcher.appId, userId: target))
        }
        watching[watcher] = entry.targets.isEmpty ? nil : entry
    }

    /// Marks a user silent (true) or heard from again; returns whether that changed anything.
    mutating func setSilent(_ user: UserKey, _ isSilent: Bool) -> Bool {
        isSilent ? silent.insert(user).inserted : silent.remove(user) != nil
    }

    /// `user`'s session is now `session` (nil: ended). Subscriptions of another session go, and
    /// with no session its silence mark and rate limits too.
    mutating func sessionChanged(_ user: UserKey, session: UInt64?) {
        if let entry = watching[user], entry.session != session { dropSubscriptions(of: user) }
        if session == nil {
            silent.remove(user)
            for kind in limiters.keys { limiters[kind]?[user] = nil }
        }
    }

    /// The user's state is `state` now: its watchers are told if that differs from what they
    /// were last told.
    mutating func update(_ user: UserKey, to state: PeerOnlineState) -> [Notice] {
        guard let previous = reported[user], previous != state, let users = watchers[user] else { return [] }
        reported[user] = state
        version += 1
        let change = [PeerOnlineStatus(userId: user.userId, state: state)]
        return users.sorted().map { Notice(watcher: UserKey(appId: user.appId, userId: $0), peers: change, version: version) }
    }

    /// Peers `watcher` watches (tests).
    func targets(of watcher: UserKey) -> Set<String> { watching[watcher]?.targets ?? [] }

    private mutating func dropSubscriptions(of watcher: UserKey) {
        guard let entry = watching.removeValue(forKey: watcher) else { return }
        for target in entry.targets { forget(watcher.userId, of: UserKey(appId: watcher.appId, userId: target)) }
    }

    private mutating func forget(_ watcher: String, of target: UserKey) {
        watchers[target]?.remove(watcher)
        if watchers[target]?.isEmpty == true {
            watchers[target] = nil
            reported[target] = nil
        }
    }
}
