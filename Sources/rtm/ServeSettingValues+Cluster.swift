import Foundation
import Logging
import RTMPostgres
import RTMServer

/// `rtm serve`'s cluster settings (`ServeSetting.cluster`): with `postgres`, channel messages
/// through the PostgreSQL backplane.
extension ServeSettingValues {
    /// The cluster's database, this node's name and the node's listening connection, or nil
    /// without `postgres`.
    func applyCluster(to config: inout ServerConfiguration, logger: Logger) throws(ServeSettingError)
        -> (location: PostgresLocation, node: String, listener: PostgresListener)? {
        guard let postgres = string(.postgres) else {
            for setting in [ServeSetting.nodeId, .clusterAddress] where isGiven(setting) {
                throw .together([setting, .postgres], "go together (they are a cluster node's)")
            }
            return nil
        }
        if let clusterAddress = string(.clusterAddress) {
            guard Self.hostPort(clusterAddress, ports: 1...65535) != nil else { throw invalid(.clusterAddress, allowed: "host:port, port 1…65535") }
            config.clusterAddress = clusterAddress
        }
        let location: PostgresLocation
        do { location = try PostgresLocation(url: postgres) } catch { throw invalid(.postgres, allowed: "\(ServeSetting.postgres.allowed) (\(error))") }
        let port = whole(.port)
        let node = string(.nodeId) ?? "\(ProcessInfo.processInfo.hostName):\(port == 0 ? String(UInt32.random(in: 1...UInt32.max), radix: 36) : String(port))"
        guard !node.isEmpty else { throw invalid(.nodeId) }
        logger.info("cluster mode", metadata: ["postgres": "\(location.redacted)", "node": "\(node)"])
        let leaseSeconds = number(.leaseSeconds)
        var options = PostgresBackplaneOptions()
        options.lease = .milliseconds(Int64(leaseSeconds * 1000))
        options.leaseInterval = .milliseconds(Int64(leaseSeconds * 200))
        options.retention = .seconds(Int64(number(.logRetentionHours) * 3600))
        options.resendWindow = config.publishResendWindow   // ids a starting node reads back (M-3)
        options.resendMemory = config.dedupCapacity
        // One listening connection for the node's three kinds of wake-up (`PostgresListener`).
        let listener = PostgresListener(location: location)
        config.backplane = PostgresChannelBackplane(location: location, node: node, options: options, listener: listener, logger: logger)
        return (location, node, listener)
    }
}
