import ArgumentParser
import Foundation
import Logging
import RTMServer
import ServiceLifecycle
import UnixSignals

/// What `rtm serve` reloads on `SIGHUP`, until graceful shutdown: the TLS certificates (when
/// it serves TLS) and the log level (`log-level`, from the command line, the environment or the
/// configuration file, read again). A value that cannot be used is logged and the current one
/// stays.
struct ServeReloader: Service {
    let server: RTMServer
    /// `rtm serve`'s own arguments, as typed (the file and the environment are read again).
    let arguments: [String]
    let reloadsTLS: Bool
    let logger: Logger

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            if reloadsTLS { try? server.reloadTLSCertificate() }
            reloadLogLevel()
        }
    }

    private func reloadLogLevel() {
        do {
            let expanded = try ServeSettings.expand(arguments, environment: ProcessInfo.processInfo.environment)
            let serve = try Serve.parse(expanded)
            guard let level = Logger.Level(rawValue: serve.logLevel) else {
                return logger.error("SIGHUP: log-level '\(serve.logLevel)' is not one of trace, debug, info, notice, warning, error; it stays \(ServeLogHandler.level.withLockedValue { $0 })")
            }
            let before = ServeLogHandler.level.withLockedValue { $0 }
            guard before != level else { return }
            // Said at the more verbose of the two levels, so that it shows whichever way it goes.
            ServeLogHandler.level.withLockedValue { $0 = min(before, level) }
            logger.notice("SIGHUP: log level \(level) (was \(before))")
            ServeLogHandler.level.withLockedValue { $0 = level }
        } catch {
            logger.error("SIGHUP: the settings could not be read again; they stay as they were", metadata: ["reason": "\(Serve.message(for: error))"])
        }
    }
}
