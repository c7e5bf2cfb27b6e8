import NIOCore

/// The server's open WebSocket connections, their counts by kind (PCU counts MESSAGE
/// connections only, SPEC K-2, K-3), and whether it is draining. A sub-value of `HubState`:
/// changed only through its own functions.
struct ConnectionRegistry {
    /// Open connections, by id (shutdown, drain, metrics).
    private(set) var open: [UInt64: ConnectionRef] = [:]
    private var nextID: UInt64 = 1
    /// Connection counts by kind, and the PCU peak.
    private(set) var counters = ConnectionCounters()
    /// Set by `RTMServer.drain()`: `/ready` answers 503 and WebSocket upgrades are refused.
    private(set) var draining = false

    /// A new WebSocket connection: its handle, counted among the open connections.
    mutating func register(_ channel: any Channel, loopIndex: Int) -> ConnectionRef {
        defer { nextID += 1 }
        let connection = ConnectionRef(id: nextID, channel: channel, loopIndex: loopIndex)
        open[connection.id] = connection
        return connection
    }

    /// The connection closed.
    mutating func unregister(_ connection: ConnectionRef) {
        open[connection.id] = nil
    }

    /// A MESSAGE connection logged in or a STREAM connection joined (`opened`), or one closed.
    mutating func count(_ kind: ConnectionCounters.Kind, opened: Bool) {
        counters.count(kind, opened: opened)
    }

    /// Starts draining; false when it had started already.
    mutating func startDraining() -> Bool {
        defer { draining = true }
        return !draining
    }
}
