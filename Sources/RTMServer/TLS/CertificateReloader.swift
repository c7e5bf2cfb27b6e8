import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the server's TLS certificate on every SIGHUP until graceful shutdown (`rtm serve`
/// runs it next to the server). A reload that fails is logged by the server and the current
/// certificate stays; the reloader goes on waiting for the next signal.
///
/// ```swift
/// let group = ServiceGroup(configuration: .init(
///     services: [server, CertificateReloader(server: server)], gracefulShutdownSignals: [.sigterm], logger: logger))
/// ```
public struct CertificateReloader: Service {
    private let server: RTMServer

    /// A reloader for `server`'s certificate.
    public init(server: RTMServer) { self.server = server }

    /// Waits for SIGHUP, reloads, repeats; returns at graceful shutdown.
    public func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            try? server.reloadTLSCertificate()
        }
    }
}
