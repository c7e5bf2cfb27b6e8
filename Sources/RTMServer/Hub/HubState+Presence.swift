import NIOCore
import RTMProtocol

/// Presence (AGORA_REFERENCE §2.10): members, temporary state, quiet members, interval mode.
extension HubState {
    /// One member of a channel.
    struct Member {
        let sessionID: UInt64
        /// Quiet: invisible to presence (not listed, no events).
        let quiet: Bool
        /// Which channel events it receives (kept so a resumed session keeps the choice).
        var features: ChannelFeatures = .presence
        /// Temporary state in this channel; cleared when the member leaves or times out.
        var state: [String: String] = [:]
    }

    /// What changed in a channel in interval mode since the last interval event, as net
    /// changes: a join then a leave within the interval cancels out, and a leave is held for
    /// the debounce time (2 s) so that a quick rejoin cancels it too, even across intervals.
    struct IntervalChanges {
        var joined: Set<String> = []
        var left: Set<String> = []
        var timedOut: Set<String> = []
        var states: [String: [String: String]] = [:]
        /// Leaves still within the debounce time: user → (leave or timeout, when).
        var debouncing: [String: (kind: PresenceEventKind, millis: Int64)] = [:]

        var isEmpty: Bool { joined.isEmpty && left.isEmpty && timedOut.isEmpty && states.isEmpty && debouncing.isEmpty }

        mutating func record(_ kind: PresenceEventKind, user: String, state: [String: String], millis: Int64) {
            switch kind {
            case .remoteJoin:
                if debouncing.removeValue(forKey: user) == nil && left.remove(user) == nil && timedOut.remove(user) == nil {
                    joined.insert(user)
                }
            case .remoteLeave, .remoteTimeout:
                states[user] = nil
                if joined.remove(user) == nil { debouncing[user] = (kind, millis) }
            case .remoteStateChanged:
                states[user] = state
            case .snapshot, .interval:
                break
            }
        }

        /// Moves leaves older than the debounce time into `left` / `timedOut`.
        mutating func settle(nowMillis: Int64, debounceMillis: Int64) {
            for (user, leave) in debouncing where nowMillis - leave.millis >= debounceMillis {
                debouncing[user] = nil
                if leave.kind == .remoteLeave { left.insert(user) } else { timedOut.insert(user) }
            }
        }
    }

    /// The visible members of a channel and their states.
    struct Snapshot: Sendable {
        var users: [String]
        var states: [String: [String: String]]
        /// Visible members in all.
        var count: Int = 0
        /// Cursor for `whoNow` when `users` is not the whole list (a big channel).
        var nextPage: String?
    }

    /// Members listed in a subscribe snapshot at most; beyond, the rest is paged with whoNow,
    /// so that thousands joining one channel cost linear, not quadratic, time and bytes.
    static let snapshotLimit = 100

    func snapshot(_ state: ChannelState) -> Snapshot {
        if state.visible > Self.snapshotLimit {
            // The first page in user-id order, found in one pass without sorting everything.
            var page: [String] = []
            for (user, member) in state.members where !member.quiet {
                if page.count < Self.snapshotLimit {
                    page.insert(user, at: page.firstIndex { $0 > user } ?? page.count)
                } else if user < page[page.count - 1] {
                    page.removeLast()
                    page.insert(user, at: page.firstIndex { $0 > user } ?? page.count)
                }
            }
            let states = Dictionary(uniqueKeysWithValues: page.compactMap { user in
                state.members[user].flatMap { $0.state.isEmpty ? nil : (user, $0.state) }
            })
            return Snapshot(users: page, states: states, count: state.visible, nextPage: page.last)
        }
        let visible = state.members.filter { !$0.value.quiet }
        return Snapshot(users: visible.keys.sorted(), states: visible.compactMapValues { $0.state.isEmpty ? nil : $0.state },
                        count: state.visible)
    }

    /// Visible member count (carried in presence events for the classic memberCount).
    func visibleCount(_ state: ChannelState) -> Int { state.visible }

    /// A presence change: a broadcast now, or (interval mode) recorded for the next interval event.
    mutating func presenceChange(_ key: ChannelKey, _ kind: PresenceEventKind, user: String, state userState: [String: String] = [:],
                                 except: ConnectionRef?, wallMillis: Int64) -> Broadcast? {
        guard var state = channels[key] else { return nil }
        let count = visibleCount(state)
        if count > presenceIntervalThreshold {
            state.interval.record(kind, user: user, state: userState, millis: wallMillis)
            channels.put(state, for: key)
            return nil
        }
        return Broadcast(
            channel: key,
            frame: Frame(type: .presence, userId: user, channel: key.name, event: kind.rawValue, ts: wallMillis,
                         count: count, state: kind == .remoteStateChanged ? userState : nil),
            loops: state.loops, except: except)
    }

    /// The interval events due: one per channel with changes (called every presence interval).
    mutating func takeIntervalEvents(wallMillis: Int64) -> [Broadcast] {
        var out: [Broadcast] = []
        for (key, var state) in channels.states where !state.interval.isEmpty {
            state.interval.settle(nowMillis: wallMillis, debounceMillis: presenceDebounceMillis)
            var changes = state.interval
            changes.debouncing = [:]
            state.interval = IntervalChanges(debouncing: state.interval.debouncing)
            channels.put(state, for: key)
            guard !changes.isEmpty else { continue }
            out.append(Broadcast(
                channel: key,
                frame: Frame(type: .presence, channel: key.name, event: PresenceEventKind.interval.rawValue,
                             users: changes.joined.sorted(), ts: wallMillis, count: visibleCount(state),
                             states: changes.states.isEmpty ? nil : changes.states,
                             left: changes.left.sorted(), timedOut: changes.timedOut.sorted()),
                loops: state.loops, except: nil))
        }
        return out
    }

    enum StateDecision {
        case rejected(RequestRefusal)
        case changed([String: String], Broadcast?)
    }

    /// setState (merge `set`) / removeState (`remove`) for the connection's user in a channel.
    mutating func changeState(_ connection: ConnectionRef, channel name: String, set: [String: String], remove: [String],
                              limits: Limits, wallMillis: Int64) -> StateDecision {
        guard let key = sessions.key(of: connection) else { return .rejected(RequestRefusal(code: .notLogin, reason: "not logged in")) }
        let channelKey = ChannelKey(appId: key.appId, name: name)
        guard var state = channels[channelKey], var member = state.members[key.userId] else {
            return .rejected(RequestRefusal(code: .presenceNotConnected, reason: "not subscribed to '\(name)': subscribe first (the SDK caches state until then)"))
        }
        var merged = member.state.merging(set) { _, new in new }
        for key in remove { merged[key] = nil }
        if let (code, problem) = limits.stateProblem(merged) { return .rejected(RequestRefusal(code: code, reason: problem)) }
        member.state = merged
        state.members[key.userId] = member
        channels.put(state, for: channelKey)
        cluster.announce(key, session: member.sessionID, channel: name, .state(merged))
        let broadcast = member.quiet ? nil
            : presenceChange(channelKey, .remoteStateChanged, user: key.userId, state: merged, except: connection, wallMillis: wallMillis)
        return .changed(merged, broadcast)
    }

    /// A user's state in a channel; nil when the user is not a (visible) member.
    func state(of userId: String, appId: String, channel: String) -> [String: String]? {
        guard let member = channels[ChannelKey(appId: appId, name: channel)]?.members[userId], !member.quiet else { return nil }
        return member.state
    }

    /// One page (≤ `pageSize`) of a channel's visible members after the cursor `after`, and the
    /// cursor of the next page.
    func whoNow(appId: String, channel: String, after: String?, pageSize: Int) -> (snapshot: Snapshot, next: String?, total: Int) {
        guard let state = channels[ChannelKey(appId: appId, name: channel)] else { return (Snapshot(users: [], states: [:]), nil, 0) }
        let users = state.members.compactMap { $0.value.quiet ? nil : $0.key }.sorted()
        let rest = after.map { cursor in users.drop { $0 <= cursor } } ?? users[...]
        let page = Array(rest.prefix(pageSize))
        let next = rest.count > pageSize ? page.last : nil
        let states = Dictionary(uniqueKeysWithValues: page.compactMap { user in
            state.members[user].flatMap { $0.state.isEmpty ? nil : (user, $0.state) }
        })
        return (Snapshot(users: page, states: states, count: users.count), next, users.count)
    }

    /// The channels a user is a visible member of.
    func whereNow(_ user: UserKey) -> [String]? {
        // In a cluster the user's session may be on another node (the same members either way).
        guard let joined = sessions[user]?.channels ?? cluster.remote[user].map({ Set($0.session.members.keys) }) else { return nil }
        return joined.filter { channels[ChannelKey(appId: user.appId, name: $0)]?.members[user.userId]?.quiet == false }.sorted()
    }
}

extension HubState.ChannelState {
    /// Makes `member` the user's membership, replacing any other (in a cluster, another
    /// session's), with the visible count kept right. Returns the replaced one.
    @discardableResult
    mutating func put(_ member: HubState.Member, for user: String) -> HubState.Member? {
        let older = members.updateValue(member, forKey: user)
        if let older, !older.quiet { visible -= 1 }
        if !member.quiet { visible += 1 }
        return older
    }
}
