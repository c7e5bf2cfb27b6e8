#if canImport(Network)
import Network
#endif

extension RTMClient {
    /// On Apple platforms the system's network path monitor feeds `setNetworkAvailable`.
    static func startPathMonitor(for client: RTMClient) {
        #if canImport(Network)
        let monitor = NWPathMonitor()
        monitor.pathUpdateHandler = { [weak client] path in
            guard let client else { monitor.cancel(); return }
            client.setNetworkAvailable(path.status == .satisfied)
        }
        monitor.start(queue: .global(qos: .utility))
        #endif
    }
}
