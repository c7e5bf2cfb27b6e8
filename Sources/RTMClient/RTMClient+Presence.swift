import NIOCore
import RTMProtocol

/// One page of `whoNow`.
public struct WhoNowPage: Sendable, Equatable {
    /// Users on this page (at most 100), sorted.
    public let users: [String]
    /// Their states, when asked for (`includeState`).
    public let states: [String: [String: String]]
    /// Visible members in the channel in all.
    public let totalCount: Int
    /// Pass to `whoNow(...page:)` for the next page; nil on the last page.
    public let nextPage: String?
}

/// Presence (AGORA_REFERENCE §2.10): temporary state, who is where.
extension RTMClient {
    /// Sets (merges) this user's temporary state in a channel. Before the channel is subscribed
    /// the state is only cached and sent on subscribe; it is re-applied by itself after a
    /// reconnection that lost the session (SPEC P-3). Members get `remoteStateChanged`.
    /// At most 32 pairs; keys 1–64 characters, values ≤ 1 KB.
    public func setState(channel: String, _ items: [String: String]) async throws(RTMError) {
        try check(channel: channel, operation: "setState")
        let core = self.core
        let future: EventLoopFuture<Frame> = core.loop.flatSubmit {
            let merged = (core.presenceStates[channel] ?? [:]).merging(items) { _, new in new }
            if let (code, problem) = Limits().stateProblem(merged) {
                return core.loop.makeFailedFuture(RTMError(code, operation: "setState", problem))
            }
            if core.presenceStates[channel] == nil && core.presenceStates.count >= 100 {
                return core.loop.makeFailedFuture(RTMError(.presenceCacheTooManyStates, operation: "setState",
                                                           "states of 100 channels are cached already"))
            }
            core.presenceStates[channel] = merged
            guard core.subscriptions.contains(channel) else { return core.loop.makeSucceededFuture(Frame(type: .ok)) }
            return core.request(Frame(type: .setState, channel: channel, state: items), operation: "setState")
        }
        _ = try await Self.wait(future, operation: "setState")
    }

    /// Removes keys from this user's temporary state in a channel (all keys if `keys` is nil).
    public func removeState(channel: String, keys: [String]? = nil) async throws(RTMError) {
        try check(channel: channel, operation: "removeState")
        let core = self.core
        let future: EventLoopFuture<Frame> = core.loop.flatSubmit {
            let current = core.presenceStates[channel] ?? [:]
            let removed = keys ?? Array(current.keys)
            var remaining = current
            for key in removed { remaining[key] = nil }
            core.presenceStates[channel] = remaining.isEmpty ? nil : remaining
            guard core.subscriptions.contains(channel) else { return core.loop.makeSucceededFuture(Frame(type: .ok)) }
            return core.request(Frame(type: .removeState, channel: channel, keys: removed), operation: "removeState")
        }
        _ = try await Self.wait(future, operation: "removeState")
    }

    /// A user's temporary state in a channel (this user's when `userId` is nil).
    public func getState(channel: String, userId: String? = nil) async throws(RTMError) -> [String: String] {
        try check(channel: channel, operation: "getState")
        let core = self.core
        let future = core.loop.flatSubmit {
            core.request(Frame(type: .getState, userId: userId, channel: channel), operation: "getState")
        }
        return try await Self.wait(future, operation: "getState").state ?? [:]
    }

    /// Who is in a channel now, 100 users per page (quiet members are not listed).
    public func whoNow(channel: String, includeState: Bool = false, page: String? = nil) async throws(RTMError) -> WhoNowPage {
        try check(channel: channel, operation: "whoNow")
        let core = self.core
        let future = core.loop.flatSubmit {
            core.request(Frame(type: .whoNow, channel: channel, includeState: includeState, page: page), operation: "whoNow")
        }
        let reply = try await Self.wait(future, operation: "whoNow")
        return WhoNowPage(users: reply.users ?? [], states: reply.states ?? [:], totalCount: reply.count ?? 0, nextPage: reply.page)
    }

    /// The channels a user is in (this user's when `userId` is nil).
    public func whereNow(userId: String? = nil) async throws(RTMError) -> [String] {
        let core = self.core
        let future = core.loop.flatSubmit {
            core.request(Frame(type: .whereNow, userId: userId), operation: "whereNow")
        }
        return try await Self.wait(future, operation: "whereNow").channels ?? []
    }
}
