import ArgumentParser
import Foundation
import Logging
import RTMServer
import ServiceLifecycle
import UnixSignals

/// What `rtm serve` reloads on `SIGHUP`, until graceful shutdown: the TLS certificates (when
/// it serves TLS), the log level, the namespaces, the per-connection rates (publish rate, error
/// replies) and the webhook URL and secret (from the command line, the environment or the
/// configuration file, read again). Settings that cannot be used are logged and the current
/// ones stay.
struct ServeReloader: Service {
    let server: RTMServer
    /// `rtm serve`'s own arguments, as typed (the file and the environment are read again).
    let arguments: [String]
    let reloadsTLS: Bool
    let logger: Logger

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            if reloadsTLS { try? server.reloadTLSCertificate() }
            do {
                let expanded = try ServeSettings.expand(arguments, environment: ProcessInfo.processInfo.environment)
                let serve = try Serve.parse(expanded)
                reloadLogLevel(serve)
                try await reloadNamespaces(serve)
                try await server.reloadLimits(ConnectionLimits(publishRatePerSecond: serve.publishRate, errorReplyRatePerSecond: serve.errorReplyRate,
                                                               errorReplyBurst: serve.errorReplyBurst))
                switch (serve.webhookUrl, server.webhookStats != nil) {
                case (let url?, true): try server.reloadWebhook(url: url, secret: serve.webhookSecret ?? "")
                case (nil, true): logger.error("SIGHUP: turning webhooks off takes a restart; they keep going to the current URL")
                case (_?, false): logger.error("SIGHUP: turning webhooks on takes a restart")
                case (nil, false): break
                }
                logger.notice("SIGHUP: settings reloaded", metadata: ["publish-rate": "\(serve.publishRate)", "error-reply-rate": "\(serve.errorReplyRate)"])
            } catch {
                logger.error("SIGHUP: the settings could not be read again; they stay as they were", metadata: ["reason": "\(Serve.message(for: error))"])
            }
        }
    }

    private func reloadNamespaces(_ serve: Serve) async throws {
        let namespaces = try serve.namespace.map { text in
            do throws(NamespaceError) { return try ChannelNamespace(parsing: text) } catch { throw ValidationError("--namespace: \(error)") }
        }
        try await server.reloadAccessRules(namespaces: namespaces, defaultCapabilities: try Serve.defaultCapabilities(serve.defaultCapability))
        logger.notice("SIGHUP: namespaces and default capability", metadata: ["namespaces": "\(serve.namespace)",
                                                                              "default-capability": "\(serve.defaultCapability ?? "none")"])
    }

    private func reloadLogLevel(_ serve: Serve) {
        guard let level = Logger.Level(rawValue: serve.logLevel) else {
            return logger.error("SIGHUP: log-level '\(serve.logLevel)' is not one of trace, debug, info, notice, warning, error; it stays \(ServeLogHandler.level.withLockedValue { $0 })")
        }
        let before = ServeLogHandler.level.withLockedValue { $0 }
        guard before != level else { return }
        // Said at the more verbose of the two levels, so that it shows whichever way it goes.
        ServeLogHandler.level.withLockedValue { $0 = min(before, level) }
        logger.notice("SIGHUP: log level \(level) (was \(before))")
        ServeLogHandler.level.withLockedValue { $0 = level }
    }
}
