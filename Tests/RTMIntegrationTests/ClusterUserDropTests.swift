import Foundation
import Logging
import NIOCore
import RTMPostgres
import RTMTestSupport
import Testing
@testable import RTMClient
@testable import RTMServer

/// An online receiver is told at once when messages for it were dropped before its node could
/// read them (SPEC M-1: "the loss is reported, never silent"), not only at its next login.
@Suite(.realTime, .serialized, .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct ClusterUserDropTests {
    @Test("M-1: the receiver's node cannot read the store while another node commits past the cap for it: once it reads again, the online receiver gets a dropped event with the count, then the messages kept")
    func onlineReceiverToldOfDrops() async throws {
        let (database, location, logger) = try await ClusterTests.database(label: "test.drops")
        defer { database.destroy() }
        let toDatabase = try await FaultProxy.scoped(targetPort: database.port)   // node b's user store only
        let proxied = try PostgresLocation(url: "postgres://\(database.user)@127.0.0.1:\(toDatabase.port)/\(database.database)?sslmode=disable")
        func node(_ name: String, userStore: PostgresLocation) async throws -> Harness {
            let store = try await PostgresUserMessageStore.open(location: userStore, node: name, pollInterval: .milliseconds(50),
                                                                retryInterval: .milliseconds(50), callTimeout: .seconds(1), logger: logger)
            var config = Harness.serverConfig()
            config.userMessageCap = 5
            config.backplane = PostgresChannelBackplane(location: location, node: name, options: ClusterTests.options(), logger: logger)
            let server = try RTMServer(configuration: config, store: store, logger: logger)
            return Harness(server: server, port: try await server.start())
        }
        let a = try await node("a", userStore: location)
        let b = try await node("b", userStore: proxied)
        do {
            let (alice, _) = try await ClusterTests.client("alice", port: a.port)
            let (bob, bobEvents) = try await ClusterTests.client("bob", port: b.port)
            _ = try await alice.publish(toUser: "bob", message: "m1")
            #expect(await bobEvents.first(within: soon) { $0.messageEvent?.text == "m1" } != nil)

            toDatabase.setMode(.blackhole)   // b can neither read nor acknowledge
            for i in 2...11 { _ = try await alice.publish(toUser: "bob", message: "m\(i)") }   // 11 stored, cap 5: m1-m6 dropped
            toDatabase.cutAll()
            toDatabase.setMode(.pass)

            #expect(await bobEvents.first(within: .seconds(30)) { $0.messageEvent?.text == "m11" } != nil)   // generous: the pool reconnects after its backoff
            let seen = await bobEvents.all.compactMap { event -> String? in
                switch event {
                case .userMessagesDropped(let count): "dropped \(count)"
                case .message(let m) where m.channelType == .user: m.text
                default: nil
                }
            }
            // m1 was delivered; m2-m6 never were: told, then the five kept.
            #expect(seen == ["m1", "dropped 5", "m7", "m8", "m9", "m10", "m11"], "\(seen)")

            // Not reported twice: a new login finds nothing more to report (once bob's
            // acknowledgements are committed, so that m12 drops nothing that waits).
            #expect(await eventually(within: .seconds(10)) {
                (try? await database.sql("SELECT count(*) FROM rtm_user_message WHERE receiver = 'bob'").trimmingCharacters(in: .whitespacesAndNewlines)) == "0"
            })
            await bob.logout()
            let (again, againEvents) = try await ClusterTests.client("bob", port: b.port)
            _ = try await alice.publish(toUser: "bob", message: "m12")
            #expect(await againEvents.first(within: soon) { $0.messageEvent?.text == "m12" } != nil)
            #expect(await againEvents.all.allSatisfy { if case .userMessagesDropped = $0 { false } else { true } })
            for client in [alice, again] { await client.logout() }
        } catch {
            Issue.record("database log:\n\(database.log.suffix(1_500))")
            throw error
        }
        await a.stop()
        await b.stop()
        try? await toDatabase.stop()
    }
}
