import NIOCore
import NIOEmbedded
import RTMProtocol
import Testing
@testable import RTMServer

/// A cluster node follows only the channels it has subscribers or replay buffers for
/// (`ChannelInterest`, HubState+Interest), as values: asked for once, requests waiting until the
/// backplane reports the channel's position, stopped after the idle time.
struct ChannelInterestTests {
    private let key = ChannelKey(appId: "app", name: "room")
    private let loop = EmbeddedEventLoop()

    private func message(_ seq: UInt64, epoch: String = "E") -> BackplaneMessage {
        BackplaneMessage(appId: "app", channel: "room", seq: seq, epoch: epoch, publisher: "p", customType: nil, isText: true,
                         payload: ByteBuffer(string: "m\(seq)"), millis: Hub.wallMillis + Int64(seq))   // one frame each
    }

    /// A node's state in a cluster (a single node follows everything).
    private func clusterState(replayMax: Int = 32) -> HubState {
        var configuration = ServerConfiguration()
        configuration.channelReplayMax = replayMax
        var state = HubState(configuration: configuration)
        state.interest = ChannelInterest(followsEverything: false)
        return state
    }

    @Test("M-2 across nodes: one follow per channel however many requests wait; a stop names its follow; a single node never waits")
    func interestValue() {
        var interest = ChannelInterest(followsEverything: false)
        let first = loop.makePromise(of: Bool.self), second = loop.makePromise(of: Bool.self)
        #expect(interest.need(key, waiter: first) == .wait(generation: 1))
        #expect(interest.need(key, waiter: second) == .wait(generation: nil))   // asked already
        #expect(!interest.isFollowed(key))
        #expect(interest.failed(key, generation: 7) == nil)   // not the follow that is starting
        #expect(interest.started(key).count == 2)
        #expect(interest.isFollowed(key) && interest.need(key, waiter: nil) == .ready)
        // Unused: the first sweep notes it, a sweep after the idle time stops it, with its generation.
        #expect(interest.sweep(nowMillis: 1_000, idleMillis: 500) { _ in false }.isEmpty)
        #expect(interest.sweep(nowMillis: 1_200, idleMillis: 500) { _ in false }.isEmpty)
        let ended = interest.sweep(nowMillis: 1_500, idleMillis: 500) { _ in false }
        #expect(ended.map(\.0) == [key] && ended.map(\.1) == [1])
        #expect(!interest.isFollowed(key) && interest.count == 0)
        // Followed again: a new generation, so that the earlier stop cannot end it.
        #expect(interest.need(key, waiter: nil) == .wait(generation: 2))
        first.succeed(true)
        second.succeed(true)

        var single = ChannelInterest(followsEverything: true)
        #expect(single.need(key, waiter: nil) == .ready && single.isFollowed(key))
    }

    @Test("M-2 across nodes: a channel in use is not stopped: a subscriber back before the idle time ends the idleness")
    func inUseIsKept() {
        var interest = ChannelInterest(followsEverything: false)
        _ = interest.need(key, waiter: nil)
        _ = interest.started(key)
        _ = interest.sweep(nowMillis: 0, idleMillis: 100) { _ in false }   // idle from 0
        _ = interest.sweep(nowMillis: 50, idleMillis: 100) { _ in true }    // in use again
        #expect(interest.sweep(nowMillis: 150, idleMillis: 100) { _ in false }.isEmpty)   // idle from 150 now
        #expect(interest.isFollowed(key))
    }

    @Test("M-2 across nodes: a first subscriber's channel is asked for with its position; the start gives the cluster's position and what it missed, for replay")
    func startGivesPositionAndReplay() throws {
        var state = clusterState()
        let waiter = loop.makePromise(of: Bool.self)
        let (ready, actions) = state.needFollowing([HubState.FollowNeed(key: key, after: ChannelPosition(epoch: "E", seq: 3), waiter: waiter)])
        #expect(!ready)
        guard case .follow(let follows)? = actions.last else { Issue.record("no follow asked for: \(actions)"); return }
        #expect(follows == [BackplaneFollow(appId: "app", channel: "room", generation: 1, after: ChannelPosition(epoch: "E", seq: 3), replayMax: 32)])
        // The backplane's start: number 6, with 4…6 for the subscriber at 3.
        let (waiters, gap, messages) = state.followStarted(BackplaneFollowStart(appId: "app", channel: "room", epoch: "E", seq: 6,
                                                                                recent: [message(4), message(5), message(6)]),
                                                           nowMillis: Hub.wallMillis)
        #expect(waiters.count == 1 && gap == nil && messages.isEmpty)
        #expect(state.interest.isFollowed(key))
        #expect(state.channelPosition(key) == ChannelPosition(epoch: "E", seq: 6))
        let replay = state.replay(key, after: ChannelPosition(epoch: "E", seq: 3), nowMillis: Hub.wallMillis)
        #expect(replay.lost == nil && replay.messages.count == 3)
        // Followed now: the next request goes on at once.
        #expect(state.needFollowing([HubState.FollowNeed(key: key, after: nil)]).ready)
        waiter.succeed(true)
    }

    @Test("M-2 across nodes: a follow tried again for subscribers already here: what they missed is delivered after a gap for what the start could not bring")
    func retryCatchesUpSubscribers() {
        var state = clusterState(replayMax: 2)
        state.setLoop(0, hasSubscribers: true, channel: key)
        _ = state.applyCommitted([message(1)][...], channel: key, allocator: ByteBufferAllocator())
        // The node's subscribers are at 1; the cluster is at 5 and the start brings 4 and 5.
        let (_, gap, messages) = state.followStarted(BackplaneFollowStart(appId: "app", channel: "room", epoch: "E", seq: 5,
                                                                          recent: [message(4), message(5)]), nowMillis: Hub.wallMillis)
        #expect(gap == BackplaneGap(appId: "app", channel: "room", epoch: "E", from: 2, to: 3))
        #expect(messages.map(\.seq) == [4, 5])
    }

    @Test("M-2 across nodes: a failed follow answers its requests false; a channel with subscribers here is asked for again after the retry interval, from where they stand")
    func failedFollowRetries() throws {
        var state = clusterState()
        let waiter = loop.makePromise(of: Bool.self)
        let (_, actions) = state.needFollowing([HubState.FollowNeed(key: key, after: nil, waiter: waiter)])
        guard case .follow(let follows)? = actions.last else { Issue.record("no follow"); return }
        state.setLoop(0, hasSubscribers: true, channel: key)   // a resumed session's connection joined meanwhile
        let now = NIODeadline.now()
        let failed = state.followFailed(follows, now: now)
        guard case .answerFollow(let answered, false)? = failed.first, answered.count == 1 else { Issue.record("\(failed)"); return }
        guard case .schedule(.followRetry(key), _, _)? = failed.last else { Issue.record("no retry: \(failed)"); return }
        #expect(!state.interest.isFollowed(key))
        let retry = state.timerFired(.followRetry(key), now: now, wallMillis: Hub.wallMillis)
        guard case .follow(let again)? = retry.last else { Issue.record("not asked again: \(retry)"); return }
        #expect(again.first?.generation == 2 && again.first?.after?.seq == 0)
        waiter.succeed(false)
    }

    @Test("M-2 across nodes: the sweep stops following a channel without local subscribers for the replay window, and drops its buffer")
    func sweepStops() {
        var configuration = ServerConfiguration()
        configuration.channelReplayWindow = .seconds(1)
        var state = HubState(configuration: configuration)
        state.interest = ChannelInterest(followsEverything: false)
        _ = state.needFollowing([HubState.FollowNeed(key: key, after: nil)])
        _ = state.followStarted(BackplaneFollowStart(appId: "app", channel: "room", epoch: "E", seq: 0), nowMillis: 0)
        _ = state.applyCommitted([message(1)][...], channel: key, allocator: ByteBufferAllocator())
        #expect(state.sweepInterest(nowMillis: 10_000).isEmpty)   // idle from now
        let actions = state.sweepInterest(nowMillis: 11_000)
        guard case .unfollow(let ended)? = actions.first else { Issue.record("not stopped: \(actions)"); return }
        #expect(ended == [BackplaneFollow(appId: "app", channel: "room", generation: 1)])
        #expect(state.channels[key] == nil && !state.interest.isFollowed(key))
    }
}
