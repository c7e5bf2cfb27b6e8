import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import RTMPostgres
import RTMServer
import RTMTestSupport
import Testing

/// The channel log on a real PostgreSQL started for the test (initdb + pg_ctl on a free port).
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresChannelLogTests {
    static let logger = Logger(label: "test.postgres")

    /// Runs `body` with a fresh database server and a running client (several = several nodes).
    func withDatabase(clients count: Int = 1,
                              _ body: @Sendable (PostgresTestServer, [PostgresClient]) async throws -> Void) async throws {
        let server = try await PostgresTestServer.start()
        defer { server.destroy() }
        let location = try PostgresLocation(url: server.url + "?sslmode=disable")
        let clients = (0..<count).map { _ in PostgresClient(configuration: location.clientConfiguration(connections: 4), backgroundLogger: Self.logger) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { await client.run() } }
            do {
                try await body(server, clients)
            } catch {
                group.cancelAll()
                Issue.record("database log:\n\(server.log.suffix(2_000))")
                throw error
            }
            group.cancelAll()
        }
    }

    func message(_ channel: String, _ text: String, publisher: String = "alice", msgId: UInt64? = nil,
                 millis: Int64 = 1) -> ChannelLogAppend {
        ChannelLogAppend(appId: "app", channel: channel, publisher: publisher, msgId: msgId, customType: nil, isText: true,
                         payload: ByteBuffer(string: text), millis: millis)
    }

    @Test("migrations run once, from several nodes at once, and leave the latest version")
    func migratesOnce() async throws {
        try await withDatabase(clients: 3) { _, clients in
            let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                for client in clients { group.addTask { try await PostgresSchema.migrate(client, logger: Self.logger) } }
                var all: [[Int]] = []
                for try await versions in group { all.append(versions) }
                return all
            }
            #expect(applied.filter { !$0.isEmpty } == [Array(1...PostgresSchema.latestVersion)])
            #expect(try await PostgresSchema.migrate(clients[0], logger: Self.logger).isEmpty)
            // An operator who built migration 9's index beforehand (concurrently, so that appends
            // go on: docs/cluster.md, Rolling upgrade) migrates all the same.
            try await clients[0].query("DELETE FROM rtm_schema WHERE version >= 9", logger: Self.logger)
            try await clients[0].query("DROP FUNCTION rtm_append", logger: Self.logger)
            #expect(try await PostgresSchema.migrate(clients[0], logger: Self.logger).first == 9)
        }
    }

    @Test("rolling upgrade: a database a newer release migrated still starts a node of this release, unless a migration marked breaking raised schema_compatible_from past it; the refusal names both versions")
    func newerSchema() async throws {
        try await withDatabase { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let newer = PostgresSchema.latestVersion + 1
            try await clients[0].query("INSERT INTO rtm_schema (version) VALUES (\(newer))", logger: Self.logger)
            #expect(try await PostgresSchema.migrate(clients[0], logger: Self.logger).isEmpty)   // runs on the tables it knows
            try await clients[0].query("INSERT INTO rtm_meta (key, value) VALUES ('schema_compatible_from', \(String(newer)))",
                                       logger: Self.logger)
            do {
                try await PostgresSchema.migrate(clients[0], logger: Self.logger)
                Issue.record("a node started on a schema that breaks it")
            } catch let error as PostgresSchemaError {
                #expect(error.description.contains("needs a server of schema version \(newer)"))
                #expect(error.description.contains("this server's is \(PostgresSchema.latestVersion)"))
            }
        }
    }

    @Test("M-2: one dense sequence per channel across writers; a batch's receipts follow its order; fields round-trip")
    func appendAssignsSequences() async throws {
        try await withDatabase { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let log = PostgresChannelLog(client: clients[0], logger: Self.logger)
            let first = try await log.append([message("a", "1"), message("b", "1"), message("a", "2", msgId: 7)], node: "n1")
            #expect(first.map(\.seq) == [1, 1, 2])
            // Every channel's numbering starts in the epoch the start position announces.
            let start = try await log.startPosition()
            #expect(first.allSatisfy { $0.epoch == ChannelLogStart.firstEpoch(cluster: start.cluster, timeline: start.timeline) })
            #expect(start.cluster.hasPrefix("pg") && start.timeline.count == 8)
            var typed = message("a", "3")
            typed.customType = "PNG"
            typed.msgId = UInt64.max
            typed.isText = false
            let second = try await log.append([typed], node: "n2")
            #expect(second == [ChannelLogReceipt(seq: 3, epoch: first[0].epoch)])
            let stored = try await log.messages(appId: "app", channel: "a", after: 1, limit: 10)
            #expect(stored.map(\.seq) == [2, 3])
            #expect(stored[1].customType == "PNG" && stored[1].msgId == UInt64.max && !stored[1].isText && stored[1].node == "n2")
            #expect(stored[0].customType == nil && stored[0].msgId == 7 && String(buffer: stored[0].payload) == "2")
            // M-3: a starting node reads back the ids of the resend window: the newest
            // `resendMemory` per publisher, oldest first (the rows above are from 1970: outside).
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var recent: [ChannelLogAppend] = []
            for (id, publisher) in [(10, "alice"), (11, "alice"), (5, "bob"), (12, "alice")] as [(UInt64, String)] {
                var item = message("r", "\(id)", publisher: publisher)
                item.msgId = id
                item.millis = now
                recent.append(item)
            }
            _ = try await log.append(recent, node: "n1")
            let back = try await log.startPosition(resendWindow: .seconds(60), resendMemory: 2)
            #expect(back.recentIds.map { "\($0.publisher)#\($0.msgId)@\($0.seq)" } == ["alice#11@2", "bob#5@3", "alice#12@4"])
            #expect(try await log.startPosition().recentIds.isEmpty)
        }
    }

    @Test("M-3: a resend is recognised by the database whatever the node has read: by another node, in the same batch, or racing the first attempt; it gets the first copy's number and is stored once; after the resend window the id is new")
    func resendsRecognisedByTheDatabase() async throws {
        try await withDatabase(clients: 2) { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let n1 = PostgresChannelLog(client: clients[0], resendWindow: .seconds(60), logger: Self.logger)
            let n2 = PostgresChannelLog(client: clients[1], resendWindow: .seconds(60), logger: Self.logger)
            let first = try await n1.append([message("a", "1", msgId: 10, millis: now), message("b", "1", msgId: 11, millis: now)], node: "n1")
            #expect(first.map(\.seq) == [1, 1] && first.allSatisfy { !$0.resent })
            // Through another node that has read nothing: the first copies' numbers, nothing stored;
            // the new message in the same batch (and a repeat of it) numbered as if they were alone.
            let again = try await n2.append([message("b", "1", msgId: 11, millis: now), message("a", "2", msgId: 12, millis: now),
                                             message("a", "1", msgId: 10, millis: now), message("a", "2", msgId: 12, millis: now),
                                             message("a", "3", publisher: "bob", msgId: 10, millis: now)], node: "n2")
            #expect(again.map(\.seq) == [1, 2, 1, 2, 3])
            #expect(again.map(\.resent) == [true, false, true, true, false])
            #expect(again[0].epoch == first[1].epoch && again[2].epoch == first[0].epoch)
            // Only resends: nothing is bumped or stored, and the receipts still come back (not a fence).
            #expect(try await n1.append([message("a", "1", msgId: 10, millis: now)], node: "n1") == [ChannelLogReceipt(seq: 1, epoch: first[0].epoch, resent: true)])
            let stored = try await n1.messages(appId: "app", channel: "a", after: 0, limit: 10)
            #expect(stored.map(\.seq) == [1, 2, 3] && stored.map { String(buffer: $0.payload) } == ["1", "2", "3"])
            #expect(try await n1.messages(appId: "app", channel: "b", after: 0, limit: 10).count == 1)
            // Outside the window (a first copy published before it): a new message.
            let short = PostgresChannelLog(client: clients[1], resendWindow: .milliseconds(1), logger: Self.logger)
            try await Task.sleep(nanoseconds: 5_000_000)   // the 1 ms window passing is the rule under test
            #expect(try await short.append([message("a", "4", msgId: 10, millis: now + 10)], node: "n2").map(\.seq) == [4])
            // Two nodes committing one id at once: one stores it, the other gets its number.
            for round in 0..<20 {
                let id = UInt64(1_000 + round)
                async let one = n1.append([message("race", "\(round)", msgId: id, millis: now)], node: "n1")
                async let two = n2.append([message("race", "\(round)", msgId: id, millis: now)], node: "n2")
                let (a, b) = try await (one, two)
                #expect(a[0].seq == b[0].seq && a[0].resent != b[0].resent)
            }
            #expect(try await n1.messages(appId: "app", channel: "race", after: 0, limit: 100).map(\.seq) == Array(1...20))
        }
    }

    @Test("P-2, M-3: a node the others declared dead appends nothing, even past its own lease check (the fence is in the append's statement); once it joins again it appends")
    func fencedNodeAppendsNothing() async throws {
        try await withDatabase { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let log = PostgresChannelLog(client: clients[0], logger: Self.logger)
            let registry = NodeRegistry(client: clients[0], node: "n1", interval: .seconds(1), lease: .seconds(3), logger: Self.logger)
            try await registry.register(newRun: true)
            #expect(try await log.append([message("a", "1")], node: "n1").map(\.seq) == [1])
            // Declared dead by another node (a lapsed lease), while n1 still believes its lease runs.
            try await clients[0].query("UPDATE rtm_node SET fenced_at = now() WHERE node_id = 'n1'", logger: Self.logger)
            do {
                _ = try await log.append([message("a", "2"), message("b", "1")], node: "n1")
                Issue.record("a fenced node appended")
            } catch is NodeFenced {}
            #expect(try await log.messages(appId: "app", channel: "a", after: 0, limit: 10).map(\.seq) == [1])
            #expect(try await log.messages(appId: "app", channel: "b", after: 0, limit: 10).isEmpty)
            #expect(try await log.append([message("a", "x")], node: "n2").map(\.seq) == [2])   // the others go on
            try await registry.register(newRun: false)   // it dealt with the fence and joins again
            #expect(try await log.append([message("a", "3")], node: "n1").map(\.seq) == [3])
        }
    }

    @Test("M-2: concurrent writers on two nodes lose nothing: a follower sees every message once, in each channel's order")
    func concurrentWritersLoseNothing() async throws {
        try await withDatabase(clients: 3) { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let reader = PostgresChannelLog(client: clients[2], logger: Self.logger)
            let start = try await reader.startPosition()
            let channels = (0..<5).map { "c\($0)" }
            // Two nodes, each with four concurrent publishers, every batch on several channels
            // in different orders: transactions interleave and commit out of position order.
            let applied = try await withThrowingTaskGroup(of: [ChannelLogKey: Int64]?.self) { group in
                for (index, client) in clients.prefix(2).enumerated() {
                    let writer = ChannelLogWriter(log: PostgresChannelLog(client: client, logger: Self.logger),
                                                  node: "n\(index)", maxBatch: 7)
                    for publisher in 0..<4 {
                        group.addTask {
                            for round in 0..<50 {
                                let batch = (0..<3).map { k in
                                    self.message(channels[(round + k * publisher + index) % channels.count], "\(index)-\(publisher)-\(round)-\(k)",
                                                 publisher: "p\(index)-\(publisher)")
                                }
                                _ = try await writer.append(batch)
                            }
                            return nil
                        }
                    }
                }
                // The follower reads while they write.
                group.addTask {
                    var ordering = ChannelLogOrdering(applied: start.applied)
                    var cursor = start.cursor
                    var seen = 0
                    // Bounded: a message never readable fails the expectation instead of hanging.
                    _ = try await eventually(within: .seconds(60), every: .milliseconds(2)) {
                        let (entries, next) = try await reader.read(after: cursor, limit: 50)
                        cursor = next
                        seen += ordering.accept(entries, nowMillis: 0).ready.count
                        return seen >= 2 * 4 * 50 * 3
                    }
                    #expect(seen == 2 * 4 * 50 * 3 && ordering.heldCount == 0)
                    return ordering.applied
                }
                var applied: [ChannelLogKey: Int64] = [:]
                for try await result in group { if let result { applied = result } }
                return applied
            }
            // Every channel's numbers are dense and each message was read once.
            var total = 0
            for channel in channels {
                let stored = try await reader.messages(appId: "app", channel: channel, after: 0, limit: 10_000)
                #expect(stored.map(\.seq) == Array(stride(from: 1, through: Int64(stored.count), by: 1)))   // no range to trap on an empty read
                #expect(applied[ChannelLogKey(appId: "app", channel: channel)] == Int64(stored.count))
                total += stored.count
            }
            #expect(total == 2 * 4 * 50 * 3)
        }
    }

    @Test("M-2: a row committed late under an earlier position is not skipped (the identity-column trap): the reader waits for it")
    func lateCommitIsNotSkipped() async throws {
        try await withDatabase(clients: 2) { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let reader = PostgresChannelLog(client: clients[1], logger: Self.logger)
            let writer = PostgresChannelLog(client: clients[1], logger: Self.logger)
            let start = try await reader.startPosition()
            let (inserted, insertedSink) = AsyncStream<Void>.makeStream()
            let (proceed, proceedSink) = AsyncStream<Void>.makeStream()
            // Node 1 opens a transaction, writes its row (taking the lower position and the
            // lower transaction id), and holds it open.
            let slow = Task {
                try await clients[0].withTransaction(logger: Self.logger) { connection in
                    try await connection.query("""
                        INSERT INTO rtm_channel_log (app, channel, seq, epoch, publisher, node, is_text, payload, ts)
                        VALUES ('app', 'slow', 1, 'e', 'p', 'n1', true, '\\x00'::bytea, 0)
                        """, logger: Self.logger)
                    insertedSink.yield()
                    var wait = proceed.makeAsyncIterator()
                    _ = await wait.next()
                }
            }
            var insertedIterator = inserted.makeAsyncIterator()
            _ = await insertedIterator.next()
            // Node 2 writes and commits after it: a higher position, visible first.
            _ = try await writer.append([message("fast", "1")], node: "n2")
            let (early, afterEarly) = try await reader.read(after: start.cursor)
            #expect(early.isEmpty)   // held back: an older transaction is still running
            proceedSink.yield()
            try await slow.value
            let (late, _) = try await reader.read(after: afterEarly)
            #expect(late.map(\.channel) == ["slow", "fast"])
            // What a reader by position alone does: it takes "fast" and moves past "slow".
            let byPosition = try await clients[1].query("SELECT channel FROM rtm_channel_log ORDER BY pos", logger: Self.logger)
            var order: [String] = []
            for try await channel in byPosition.decode(String.self) { order.append(channel) }
            #expect(order == ["slow", "fast"])
        }
    }

    /// The schema, the log and a follower of it (holdback 5 s, retries every 50 ms).
    static func follower(_ server: PostgresTestServer, _ clients: [PostgresClient], pollInterval: TimeAmount,
                         quietPollInterval: TimeAmount? = nil,
                         interest: ChannelLogFollower.Interest = .everyChannel) async throws -> (PostgresChannelLog, ChannelLogFollower) {
        try await PostgresSchema.migrate(clients[0], logger: logger)
        let location = try PostgresLocation(url: server.url + "?sslmode=disable")
        let log = PostgresChannelLog(client: clients[0], logger: logger)
        return (log, ChannelLogFollower(log: log, location: location, pollInterval: pollInterval, quietPollInterval: quietPollInterval,
                                        holdback: .seconds(5), retryInterval: .milliseconds(50), interest: interest, logger: logger))
    }

    @Test("M-2: the follower delivers what other nodes publish, woken by NOTIFY, and catches up after the database restarts without delivering twice")
    func followerCatchesUpAcrossRestart() async throws {
        try await withDatabase { server, clients in
            let (log, follower) = try await Self.follower(server, clients, pollInterval: .seconds(30))   // NOTIFY only
            let writer = ChannelLogWriter(log: log, node: "n1")
            let (events, sink) = AsyncStream<String>.makeStream()
            let recorder = AsyncRecorder(events)
            let task = Task {
                try await follower.run { event in
                    switch event {
                    case .messages(let entries):
                        for entry in entries { sink.yield("\(entry.channel)#\(entry.seq)"); sink.yield("epoch \(entry.epoch)") }
                    case .link(let up): sink.yield(up ? "up" : "down")
                    case .gaps: sink.yield("gap")
                    case .started(let start):
                        sink.yield("first epoch \(ChannelLogStart.firstEpoch(cluster: start.cluster, timeline: start.timeline))")
                    case .newTimeline: sink.yield("new timeline")
                    case .following: sink.yield("following")
                    }
                }
            }
            defer { task.cancel() }
            // M-2: the epoch a channel's first message gets is known before it is published.
            let announced = await recorder.first(within: .seconds(10), where: { $0.hasPrefix("first epoch ") })
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "up" }) != nil)
            let receipts = try await writer.append([message("a", "x"), message("b", "y")])
            #expect(announced == "first epoch \(receipts[0].epoch)" && receipts[1].epoch == receipts[0].epoch)
            // Well within the 30 s poll: NOTIFY woke it.
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "b#1" }) != nil)
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "epoch \(receipts[0].epoch)" }) != nil)
            // The database goes away and comes back; the catch-up read after the reconnection
            // delivers what was written after the restart.
            try await server.stop()
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "down" }) != nil)
            try await server.start()
            // Refused until the database is back: retried (bounded).
            let sent = await eventually(within: .seconds(30), every: .milliseconds(50)) {
                (try? await writer.append([message("a", "z")])) != nil
            }
            #expect(sent)
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "a#2" }) != nil)
            #expect(await recorder.all.filter { $0.contains("#") } == ["a#1", "b#1", "a#2"])
        }
    }

    @Test("A database gone before the follower's first listening connection is reported down (the node assumes up at start), and up once it is back")
    func followerReportsDownBeforeFirstConnection() async throws {
        try await withDatabase { server, clients in
            let (_, follower) = try await Self.follower(server, clients, pollInterval: .milliseconds(100))
            try await server.stop()
            let (events, sink) = AsyncStream<String>.makeStream()
            let recorder = AsyncRecorder(events)
            let task = Task {
                try await follower.run { event in
                    if case .link(let up) = event { sink.yield(up ? "up" : "down") }
                }
            }
            defer { task.cancel() }
            #expect(await recorder.first(within: .seconds(10), where: { $0 == "down" }) != nil)
            try await server.start()
            #expect(await recorder.first(within: .seconds(15), where: { $0 == "up" }) != nil)
            #expect(await recorder.all == ["down", "up"])
        }
    }

    @Test("M-2: the log is read in transaction-id order, not in the order of the ids' text: small reads across 999 → 1000 skip nothing and repeat nothing")
    func readsInNumericTransactionOrder() async throws {
        try await withDatabase { _, clients in
            try await PostgresSchema.migrate(clients[0], logger: Self.logger)
            let log = PostgresChannelLog(client: clients[0], logger: Self.logger)
            let start = try await log.startPosition()
            // One transaction per message until the transaction ids pass a power of ten (a fresh
            // database starts below 1,000): ordered as text, "1000" would come before "999".
            var count = 0
            var lastXid: UInt64 = 0
            while lastXid < 1_020 || count < 40 {
                count += 1
                _ = try await log.append([message("room", "m\(count)")], node: "n1")
                for try await text in try await clients[0].query("SELECT max(xid)::text FROM rtm_channel_log", logger: Self.logger)
                    .decode(String.self) { lastXid = UInt64(text) ?? 0 }
            }
            #expect(lastXid >= 1_000)
            var cursor = start.cursor
            var seen: [Int64] = []
            while true {
                let (entries, next) = try await log.read(after: cursor, limit: 7)
                if entries.isEmpty { break }
                seen += entries.map(\.seq)
                cursor = next
            }
            #expect(seen == Array(1...Int64(count)))
        }
    }
}

/// The messages a node's `NOTIFY` carries (`ChannelLogNotice`).
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ChannelLogNoticeTests {
    /// A fresh database, its log, node "n1"'s writer and a follower of the log whose events are
    /// recorded: "channel#seq node" for each message, "gap" for each gap, "started".
    private func withFollower(pollInterval: TimeAmount, quietPollInterval: TimeAmount? = nil, interest: ChannelLogFollower.Interest = .everyChannel,
                              _ body: @Sendable (PostgresChannelLog, ChannelLogWriter, ChannelLogFollower, AsyncRecorder<String>) async throws -> Void)
        async throws {
        try await PostgresChannelLogTests().withDatabase { server, clients in
            let (log, follower) = try await PostgresChannelLogTests.follower(server, clients, pollInterval: pollInterval,
                                                                             quietPollInterval: quietPollInterval, interest: interest)
            let writer = ChannelLogWriter(log: log, node: "n1")
            let listening = NIOLockedValueBox(false)
            let (recorder, task) = record(follower, listening: listening)
            defer { task.cancel() }
            // Messages committed before the follower's start are not its to deliver: the body
            // begins once it has started, and once its listening connection is up (until then
            // it polls at `pollInterval`, which a loaded machine can make last a while: the
            // tests count its reads while notifications come).
            _ = try await events(recorder, count: 1)
            let up = await eventually(within: .seconds(30)) { listening.withLockedValue { $0 } }
            #expect(up, "the listening connection never came up")
            try await body(log, writer, follower, recorder)
        }
    }

    /// Records `follower`'s events; `listening` follows its listening connection's state.
    private func record(_ follower: ChannelLogFollower, listening: NIOLockedValueBox<Bool>) -> (AsyncRecorder<String>, Task<Void, any Error>) {
        let (events, sink) = AsyncStream<String>.makeStream()
        let task = Task {
            try await follower.run { event in
                switch event {
                case .messages(let entries): for entry in entries { sink.yield("\(entry.channel)#\(entry.seq) \(entry.node)") }
                case .gaps: sink.yield("gap")
                case .started: sink.yield("started")
                case .following(let starts): for start in starts { sink.yield("following \(start.key.channel)#\(start.seq) \(start.recent.count)") }
                case .link(let up): listening.withLockedValue { $0 = up }
                case .newTimeline: break
                }
            }
        }
        return (AsyncRecorder(events), task)
    }

    /// Everything recorded once there are `count` events (or after 10 s).
    private func events(_ recorder: AsyncRecorder<String>, count: Int) async throws -> [String] {
        _ = await eventually(within: .seconds(10)) { await recorder.all.count >= count }
        return await recorder.all
    }

    @Test("M-2: messages announced in their node's NOTIFY are delivered without reading the log (one read for a channel's first message, whose epoch the follower learns from the log)")
    func announcedMessagesNeedNoRead() async throws {
        try await withFollower(pollInterval: .seconds(3600)) { _, writer, follower, recorder in
            // The reconnection's catch-up read happens once the listening connection is open;
            // a first message makes sure it has (its notification comes on that connection).
            _ = try await writer.append([item("warm-up", 1)])
            #expect(try await events(recorder, count: 2) == ["started", "warm-up#1 n1"])
            let before = follower.reads
            var expected = ["started", "warm-up#1 n1"]
            for seq in 1...20 {
                _ = try await writer.append([item("room", seq)])
                expected.append("room#\(seq) n1")
            }
            #expect(try await events(recorder, count: expected.count) == expected)
            #expect(follower.reads - before <= 2, "reads: \(follower.reads - before) for 20 announced messages")
        }
    }

    @Test("A node follows only the channels it asks for: each starts where it stands (with what a resuming subscriber missed), then comes by notification or read; others' messages never reach it; a stop names its follow")
    func followsOnlyWhatItAsksFor() async throws {
        let room = ChannelLogKey(appId: "app", channel: "room"), lobby = ChannelLogKey(appId: "app", channel: "lobby")
        try await withFollower(pollInterval: .milliseconds(50), quietPollInterval: .milliseconds(200), interest: .followed) { log, writer, follower, recorder in
            #expect(try await events(recorder, count: 1) == ["started"])
            let receipts = try await writer.append([item("room", 1), item("room", 2), item("other", 1)])
            // Asked for with a subscriber at 1: it starts at 2 and brings number 2.
            try await follower.follow([ChannelLogFollow(key: room, generation: 1, after: (receipts[0].epoch, 1), replayMax: 10)])
            #expect(try await events(recorder, count: 2) == ["started", "following room#2 1"])
            _ = try await writer.append([item("other", 2), item("room", 3)])
            // Number 3 by notification; one by a node that never notifies comes with a read.
            _ = try await log.append([item("room", 4)], node: "n2")
            #expect(try await events(recorder, count: 4) == ["started", "following room#2 1", "room#3 n1", "room#4 n2"])
            // A stop for another follow does nothing; the right one stops it.
            follower.unfollow([room: 7])
            _ = try await writer.append([item("room", 5)])
            #expect(try await events(recorder, count: 5).last == "room#5 n1")
            follower.unfollow([room: 1])
            _ = try await writer.append([item("room", 6), item("other", 3)])
            _ = try await log.append([item("room", 7)], node: "n2")
            try await follower.follow([ChannelLogFollow(key: lobby, generation: 2)])
            _ = try await writer.append([item("lobby", 1)])
            // Polls came and went (200 ms): nothing of room or other. A window in which nothing
            // may happen: the rule is a negative.
            try await Task.sleep(for: .milliseconds(500))
            #expect(await recorder.all == ["started", "following room#2 1", "room#3 n1", "room#4 n2", "room#5 n1",
                                           "following lobby#0 0", "lobby#1 n1"])
            // Followed again, from its number now: nothing missed is delivered twice or late.
            try await follower.follow([ChannelLogFollow(key: room, generation: 3)])
            _ = try await writer.append([item("room", 8)])
            #expect(try await events(recorder, count: 9).suffix(2) == ["following room#7 0", "room#8 n1"])
        }
    }

    @Test("M-2: a message whose notification was lost is read at the next poll, and the announced message after it waits for it: in order, once")
    func lostNotificationIsRead() async throws {
        try await withFollower(pollInterval: .milliseconds(300)) { log, writer, follower, recorder in
            _ = try await writer.append([item("room", 1)])
            #expect(try await events(recorder, count: 2) == ["started", "room#1 n1"])
            // Number 2 committed by another node that never notifies (a node that died after
            // its commit), number 3 announced at once: 3 waits for 2's read.
            _ = try await log.append([item("room", 2)], node: "n2")
            _ = try await writer.append([item("room", 3)])
            #expect(try await events(recorder, count: 4) == ["started", "room#1 n1", "room#2 n2", "room#3 n1"])
            // Nothing twice: the poll's reads of 1–3 deliver nothing more.
            let reads = follower.reads
            _ = await eventually(within: .seconds(10)) { follower.reads >= reads + 2 }
            _ = try await writer.append([item("room", 4)])
            #expect(try await events(recorder, count: 5) == ["started", "room#1 n1", "room#2 n2", "room#3 n1", "room#4 n1"])
        }
    }

    @Test("M-2: while its notifications come and nothing is missing the follower does not poll; a number held for a lost one makes it poll again at once, so the lost one is read and delivered in order, not given up as a gap")
    func quietWhileNotified() async throws {
        try await withFollower(pollInterval: .milliseconds(50), quietPollInterval: .seconds(3600)) { log, writer, follower, recorder in
            _ = try await writer.append([item("room", 1)])
            #expect(try await events(recorder, count: 2) == ["started", "room#1 n1"])
            let quiet = follower.reads
            // Listening, nothing missing: no reads (at 50 ms there would be about twenty; at
            // most one: the catch-up read of the connection's opening, if it came after number 1).
            // A window in which nothing may happen: the rule is a negative.
            try await Task.sleep(for: .seconds(1))
            #expect(follower.reads - quiet <= 1, "reads while quiet: \(follower.reads - quiet)")
            // Number 2 from a node that died before its NOTIFY, number 3 announced: 3 is held,
            // and the follower reads until 2 comes (well before the 5 s hold-back's gap).
            _ = try await log.append([item("room", 2)], node: "n2")
            _ = try await writer.append([item("room", 3)])
            #expect(try await events(recorder, count: 4) == ["started", "room#1 n1", "room#2 n2", "room#3 n1"])
        }
    }

    @Test("M-2: a notification's text: messages round-trip with every field; a batch too large for PostgreSQL's 8000 bytes, or an empty text, carries none; nor more messages than it can hold, or a name too long for the form")
    func noticeText() throws {
        let entries = [
            ChannelLogEntry(appId: "app", channel: "room", seq: 7, epoch: "c.1", publisher: "alice", node: "n1", msgId: UInt64.max,
                            customType: "t", isText: false, payload: ByteBuffer(bytes: [0, 1, 255]), millis: 1_700_000_000_000),
            ChannelLogEntry(appId: "app", channel: "room", seq: 8, epoch: "c.1", publisher: "bob", node: "n1", msgId: nil,
                            customType: nil, isText: true, payload: ByteBuffer(string: "hé"), millis: 1),
        ]
        let text = try #require(ChannelLogNotice.encode(entries))
        #expect(ChannelLogNotice.decode(text) == entries)
        let large = ChannelLogEntry(appId: "app", channel: "room", seq: 1, epoch: "c.1", publisher: "alice", node: "n1", msgId: nil,
                                    customType: nil, isText: true, payload: ByteBuffer(repeating: 65, count: 3_000), millis: 1)
        #expect(ChannelLogNotice.encode([large]) != nil)
        #expect(ChannelLogNotice.encode([large, large]) == nil)
        let small = entries[1]
        #expect(ChannelLogNotice.encode(Array(repeating: small, count: ChannelLogNotice.maxMessages + 1)) == nil)
        var long = small
        long.channel = String(repeating: "c", count: 70_000)
        #expect(ChannelLogNotice.encode([long]) == nil)
        #expect(ChannelLogNotice.decode("") == nil)
        #expect(ChannelLogNotice.decode("{\"v\":2,\"m\":[]}") == nil)
    }

    @Test("M-2: the database builds a commit's notification in the form the nodes read: the text ChannelLogNotice.encode gives for the numbers committed, every field; a resend is not in it; a batch too large for a notification, or of more messages than it holds, is a plain wake-up; an append not announced sends nothing")
    func databaseBuildsTheNotice() async throws {
        try await PostgresChannelLogTests().withDatabase { server, clients in
            try await PostgresSchema.migrate(clients[0], logger: PostgresChannelLogTests.logger)
            let log = PostgresChannelLog(client: clients[0], logger: PostgresChannelLogTests.logger)
            let listener = PostgresListener(location: try PostgresLocation(url: server.url + "?sslmode=disable"))
            let shard = ChannelLogShards.notificationChannel(for: ChannelLogKey(appId: "app", channel: "room"))
            func entries(_ items: [ChannelLogAppend], _ receipts: [ChannelLogReceipt]) -> [ChannelLogEntry] {
                zip(items, receipts).map { item, receipt in
                    ChannelLogEntry(appId: item.appId, channel: item.channel, seq: receipt.seq, epoch: receipt.epoch, publisher: item.publisher,
                                    node: "n1", msgId: item.msgId, customType: item.customType, isText: item.isText, payload: item.payload,
                                    millis: item.millis)
                }
            }
            let task = Task {
                try await listener.listen(on: shard, logger: PostgresChannelLogTests.logger) { notifications in
                    var next = notifications.makeAsyncIterator()
                    let items = [
                        ChannelLogAppend(appId: "app", channel: "room", publisher: "bób", msgId: UInt64.max, customType: "tÿpe", isText: false,
                                         payload: ByteBuffer(bytes: [0, 1, 255]), millis: Int64(Date().timeIntervalSince1970 * 1000)),
                        ChannelLogAppend(appId: "app", channel: "room", publisher: "alice", msgId: nil, customType: nil, isText: true,
                                         payload: ByteBuffer(string: "hé"), millis: 1),
                    ]
                    let receipts = try await log.append(items, node: "n1", announce: true)
                    #expect(try await next.next()?.payload == ChannelLogNotice.encode(entries(items, receipts)))
                    // A resend of the first (within the resend window) beside a new message: only the new one.
                    let fresh = item("room", 3)
                    let again = try await log.append([items[0], fresh], node: "n1", announce: true)
                    #expect(again[0].resent && again[0].seq == receipts[0].seq)
                    #expect(try await next.next()?.payload == ChannelLogNotice.encode(entries([fresh], [again[1]])))
                    // Too large to carry: an empty notification (the followers read).
                    var large = item("room", 4)
                    large.payload = ByteBuffer(repeating: 65, count: ChannelLogNotice.maxBytes)
                    _ = try await log.append([large], node: "n1", announce: true)
                    #expect(try await next.next()?.payload == "")
                    // More messages than a notification can hold: one plain wake-up.
                    let many = (0...ChannelLogNotice.maxMessages).map { item("room", 1_000 + $0) }
                    _ = try await log.append(many, node: "n1", announce: true)
                    #expect(try await next.next()?.payload == "")
                    // Not announced: the next notification is the next announced append's.
                    _ = try await log.append([item("room", 5)], node: "n1")
                    let last = item("room", 6)
                    let lastReceipts = try await log.append([last], node: "n1", announce: true)
                    #expect(try await next.next()?.payload == ChannelLogNotice.encode(entries([last], lastReceipts)))
                }
            }
            // Bounded: a notification that never comes fails the test instead of hanging it.
            let outcome = await withDeadline(.seconds(20)) {
                await withTaskCancellationHandler { await task.result } onCancel: { task.cancel() }
            }
            guard let outcome else { Issue.record("a notification did not come within 20 s"); return }
            try outcome.get()
        }
    }

    private func item(_ channel: String, _ n: Int) -> ChannelLogAppend {
        ChannelLogAppend(appId: "app", channel: channel, publisher: "alice", msgId: UInt64(n), customType: nil, isText: true,
                         payload: ByteBuffer(string: "m\(n)"), millis: Int64(n))
    }
}
