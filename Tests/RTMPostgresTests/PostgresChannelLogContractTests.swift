import Foundation
import Logging
import NIOCore
import PostgresNIO
import RTMContracts
import RTMPostgres
import RTMTestSupport
import Testing

/// The channel log's contract (`ChannelLogContract`) on the cluster's log: `PostgresChannelLog`
/// on a real PostgreSQL, each case under an application id of its own.
@Suite("Channel log contract: PostgresChannelLog", .realTime, .contractDatabase,
       .enabled(if: PostgresTestServer.isRequiredOrAvailable, "PostgreSQL server binaries not installed"))
struct PostgresChannelLogContractTests {
    @Test(arguments: ChannelLogContract.cases)
    func contract(_ rule: ContractCase<ChannelLogSubject>) async throws {
        try await ContractDatabase.withCase(open: { database, _ in
            let client = PostgresClient(configuration: database.location.clientConfiguration(connections: 2),
                                        backgroundLogger: ContractDatabase.logger)
            let running = Task { await client.run() }
            try await PostgresSchema.migrate(client, logger: ContractDatabase.logger)
            return (client, running)
        }, stop: { opened in opened.1.cancel() }) { opened, _, name in
            let log = PostgresChannelLog(client: opened.0, logger: ContractDatabase.logger)
            try await rule.run(on: ChannelLogSubject(append: { channel, publisher, messages in
                let receipts = try await log.append(messages.map {
                    ChannelLogAppend(appId: name, channel: channel, publisher: publisher, msgId: $0.msgId, customType: nil, isText: true,
                                     payload: ByteBuffer(string: $0.text), millis: Int64(Date().timeIntervalSince1970 * 1000))
                }, node: "n1")
                return receipts.map { ChannelLogSubject.Numbered(seq: UInt64($0.seq), epoch: $0.epoch) }
            }, after: { channel, seq in
                try await log.messages(appId: name, channel: channel, after: Int64(seq), limit: 1_000).map {
                    ChannelLogSubject.Kept(seq: UInt64($0.seq), publisher: $0.publisher, text: String(buffer: $0.payload))
                }
            }))
        }
    }
}
