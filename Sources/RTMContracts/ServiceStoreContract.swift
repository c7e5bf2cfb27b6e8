import Foundation
import RTMProtocol
import RTMServer
import Testing

/// A metadata and history store under test (`SharedServiceStore`, AGORA_REFERENCE §2.8,
/// §2.11), with the lock store whose locks guard its writes, and an application no other case
/// uses.
public struct ServiceStoreSubject: Sendable {
    public let store: any SharedServiceStore
    /// The locks a guarded write checks (a single node's `MemoryLockStore`; a cluster's store
    /// is its own lock store).
    public let locks: any SharedLockStore
    /// The application the case works in (stores shared by several cases keep them apart by it).
    public let appId: String

    /// A subject over `store`.
    public init(store: any SharedServiceStore, locks: any SharedLockStore, appId: String) {
        self.store = store
        self.locks = locks
        self.appId = appId
    }

    func key(_ target: String = "doc", type: StorageType = .channel) -> StorageKey {
        StorageKey(appId: appId, type: type, target: target)
    }

    func modify(_ key: StorageKey, requiredLock: MetadataLockGuard? = nil,
                _ change: @escaping @Sendable (Metadata?) throws -> Metadata) async throws -> Metadata {
        let store = store
        return try await blocking { try store.modifyMetadata(key, requiredLock: requiredLock, change) }
    }

    func load(_ key: StorageKey) async throws -> Metadata? {
        let store = store
        return try await blocking { try store.loadMetadata(key) }
    }

    func append(_ message: HistoryMessage, channel: String = "ch", dedupKey: String? = nil) async throws -> Int64? {
        let store = store, record = HistoryRecord(appId: appId, channelType: "message", channel: channel, message: message, dedupKey: dedupKey)
        return try await blocking { try store.appendHistory(record) }
    }

    func history(channel: String = "ch", start: Int64 = .max, end: Int64 = 0, limit: Int = 100) async throws -> [HistoryMessage] {
        let store = store, app = appId
        return try await blocking { try store.history(appId: app, channelType: "message", channel: channel, start: start, end: end, limit: limit) }
    }
}

/// A set at `revision` with one item.
func set(_ revision: Int64, _ value: String, key: String = "k") -> Metadata {
    Metadata(majorRevision: revision, items: [MetadataItem(key: key, value: value, revision: revision)])
}

private struct Refused: Error, Equatable {}

/// The rules every `SharedServiceStore` keeps (§2.8 history, §2.11 metadata), a single node's
/// (`LocalServiceStore` over SQLite) and a cluster's (`PostgresServices`) alike. The revision
/// rules of a write themselves (`MetadataDocument`) are the same code on both sides, applied
/// inside `modifyMetadata`; the contract checks what the store owes them: the current set, one
/// writer at a time, nothing written on a refusal.
public enum ServiceStoreContract {
    /// Every rule.
    public static let cases: [ContractCase<ServiceStoreSubject>] = [
        .init("§2.11: a set never written reads nil; a write sees the current set and stores what it returns, read back whole; sets of other types and targets apart") { s async throws in
            #expect(try await s.load(s.key()) == nil)
            let first = try await s.modify(s.key()) { current in
                #expect(current == nil)
                return Metadata(majorRevision: 1, items: [MetadataItem(key: "a", value: "1", revision: 1, authorUserId: "alice", updateTs: 42),
                                                          MetadataItem(key: "b", value: "", revision: 1)])
            }
            let second = try await s.modify(s.key()) { current in
                #expect(current == first)
                return set(2, "2", key: "a")
            }
            #expect(try await s.load(s.key()) == second)
            #expect(try await s.load(s.key(type: .user)) == nil)
            #expect(try await s.load(s.key("other")) == nil)
        },
        .init("§2.11: a write whose change throws (a revision check failed) writes nothing and rethrows") { s async throws in
            _ = try await s.modify(s.key()) { _ in set(1, "v1") }
            await #expect(throws: Refused()) { try await s.modify(s.key()) { _ in throw Refused() } }
            #expect(try await s.load(s.key()) == set(1, "v1"))
        },
        .init("§2.11: of two writes expecting the same revision at once, exactly one wins; the other sees the winner's") { s async throws in
            _ = try await s.modify(s.key()) { _ in set(1, "v1") }
            @Sendable func write(_ value: String) async -> Bool {
                (try? await s.modify(s.key()) { current in
                    guard current?.majorRevision == 1 else { throw Refused() }
                    Thread.sleep(forTimeInterval: 0.1)   // widens the race window on purpose
                    return set(2, value)
                }) != nil
            }
            async let a = write("a")
            async let b = write("b")
            let won = await [a, b]
            #expect(won.filter { $0 }.count == 1, "\(won)")
            #expect(try await s.load(s.key()) == set(2, won[0] ? "a" : "b"))
        },
        .init("§2.11: a lock-guarded write is refused (storageLockNotAcquired), writing nothing, unless the writer holds the lock now") { s async throws in
            _ = try await s.locks.perform(.set(ttl: 10, maxLocks: 32), appId: s.appId, channel: "doc", name: "L", user: "alice")
            _ = try await s.locks.perform(.acquire, appId: s.appId, channel: "doc", name: "L", user: "alice")
            let byBob = MetadataLockGuard(lockName: "L", owner: "bob"), byAlice = MetadataLockGuard(lockName: "L", owner: "alice")
            await #expect(throws: byBob.notHeld) { try await s.modify(s.key(), requiredLock: byBob) { _ in set(1, "bob") } }
            #expect(try await s.load(s.key()) == nil)
            #expect(try await s.modify(s.key(), requiredLock: byAlice) { _ in set(1, "alice") } == set(1, "alice"))
            _ = try await s.locks.perform(.release, appId: s.appId, channel: "doc", name: "L", user: "alice")
            await #expect(throws: byAlice.notHeld) { try await s.modify(s.key(), requiredLock: byAlice) { _ in set(2, "late") } }
            let missing = MetadataLockGuard(lockName: "none", owner: "alice")
            await #expect(throws: missing.notHeld) { try await s.modify(s.key(), requiredLock: missing) { _ in set(2, "late") } }
            #expect(try await s.load(s.key()) == set(1, "alice"))
        },
        .init("§2.11: saveMetadata replaces a set; an emptied set is kept with its revision") { s async throws in
            let store = s.store, key = s.key()
            try await blocking { try store.saveMetadata(key, set(3, "v")) }
            try await blocking { try store.saveMetadata(key, Metadata(majorRevision: 4)) }
            #expect(try await s.load(key) == Metadata(majorRevision: 4))
        },
        .init("§2.8: history reads newest first, within end <= ts < start, at most limit, every field; channels apart") { s async throws in
            for ts in [1_000, 2_000, 3_000, 4_000] as [Int64] {
                _ = try await s.append(HistoryMessage(publisher: "p\(ts)", text: "t\(ts)", ts: ts))
            }
            _ = try await s.append(HistoryMessage(publisher: "bin", data: Data([0, 255]), customType: "raw", ts: 5_000))
            _ = try await s.append(HistoryMessage(publisher: "x", text: "elsewhere", ts: 1_500), channel: "other")
            #expect(try await s.history().map(\.ts) == [5_000, 4_000, 3_000, 2_000, 1_000])
            #expect(try await s.history(start: 4_000, end: 2_000).map(\.ts) == [3_000, 2_000])
            #expect(try await s.history(limit: 2).map(\.ts) == [5_000, 4_000])
            #expect(try await s.history(start: 5_001, end: 4_000) == [
                HistoryMessage(publisher: "bin", data: Data([0, 255]), customType: "raw", ts: 5_000),
                HistoryMessage(publisher: "p4000", text: "t4000", ts: 4_000)])
            #expect(try await s.history(channel: "other").map(\.text) == ["elsewhere"])
        },
        .init("§2.8: a message is stored exactly: any Unicode text, empty text and empty data apart from none") { s async throws in
            let messages = [HistoryMessage(publisher: "p", text: "", ts: 1_001),
                            HistoryMessage(publisher: "p", text: "é 中文 🎉 \"quoted\"\n\\", customType: "", ts: 1_002),
                            HistoryMessage(publisher: "p", data: Data(), ts: 1_003), HistoryMessage(publisher: "p", data: Data([0, 0xFF]), ts: 1_004)]
            for message in messages { _ = try await s.append(message) }
            let read = try await s.history()
            #expect(read.map(\.text) == messages.reversed().map(\.text))
            #expect(read.map(\.data) == messages.reversed().map(\.data))
            #expect(read.map(\.customType) == messages.reversed().map(\.customType))
        },
        .init("§2.8: a text with a NUL character is stored whole", knownDifference: nulText) { s async throws in
            #expect(try await s.append(HistoryMessage(publisher: "p", text: "zero\u{0}byte", ts: 1_000)) == 1_000)
            #expect(try await s.history().map(\.text) == ["zero\u{0}byte"])
        },
        .init("§2.11: metadata values are stored exactly: any Unicode (NUL included) and a value of the full 16 KB") { s async throws in
            let stored = Metadata(majorRevision: 1, items: [MetadataItem(key: "big", value: String(repeating: "é", count: 8_192), revision: 1),
                                                            MetadataItem(key: "odd", value: "zero\u{0}byte 🎉 \"q\"\n", revision: 1)])
            _ = try await s.modify(s.key()) { _ in stored }
            #expect(try await s.load(s.key()) == stored)
        },
        .init("§2.8: an append's timestamp is made unique in its channel (a millisecond past the newest where needed) and returned") { s async throws in
            var stored: [Int64?] = []
            for ts in [1_000, 1_000, 999, 1_005] as [Int64] { stored.append(try await s.append(HistoryMessage(publisher: "p", text: "\(ts)", ts: ts))) }
            #expect(stored == [1_000, 1_001, 1_002, 1_005])
            #expect(try await s.append(HistoryMessage(publisher: "p", ts: 1_000), channel: "other") == 1_000)
            #expect(try await s.history().map(\.ts) == [1_005, 1_002, 1_001, 1_000])
        },
        .init("§2.8 / M-3: a message whose dedupKey is stored already is not stored again (nil); the same key in another channel is another message") { s async throws in
            #expect(try await s.append(HistoryMessage(publisher: "p", text: "a", ts: 1_000), dedupKey: "e:1") == 1_000)
            #expect(try await s.append(HistoryMessage(publisher: "p", text: "a", ts: 1_000), dedupKey: "e:1") == nil)
            #expect(try await s.append(HistoryMessage(publisher: "p", text: "b", ts: 1_000), dedupKey: "e:2") == 1_001)
            #expect(try await s.append(HistoryMessage(publisher: "p", text: "a", ts: 1_000), channel: "other", dedupKey: "e:1") == 1_000)
            #expect(try await s.history().map(\.text) == ["b", "a"])
        },
        .init("§2.8: trimHistory deletes what is older than the retention and counts it") { s async throws in
            // Timestamps below 1000: no other case's (a shared store trims every application).
            for ts in [100, 200, 300] as [Int64] { _ = try await s.append(HistoryMessage(publisher: "p", ts: ts)) }
            let store = s.store
            #expect(try await blocking { try store.trimHistory(olderThan: 250) } == 2)
            #expect(try await s.history().map(\.ts) == [300])
        },
    ]
}
