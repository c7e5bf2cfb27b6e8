import RTMFaultProxy

extension FaultProxy {
    /// Starts a proxy to `127.0.0.1:targetPort` that the current test's scope
    /// (`TestResources`, which the `.realTime` trait gives each test) stops when the test ends,
    /// whatever it threw. Stopping it earlier as well is harmless.
    public static func scoped(targetPort: Int) async throws -> FaultProxy {
        let proxy = try await start(targetPort: targetPort)
        TestResources.register { try? await proxy.stop() }
        return proxy
    }
}
