import Foundation
import Logging
import RTMServer
import ServiceLifecycle
import UnixSignals

/// What `rtm serve` reloads on `SIGHUP`, until graceful shutdown: the TLS certificates (when
/// it serves TLS), and, from its settings read again (`ServeSettingsReader`: the configuration
/// file is read anew), the log level, the namespaces and the default capability, the per-connection rates (publish rate,
/// error replies) and the webhook URL and secret. Settings that cannot be used are logged, in
/// the settings' one error form, and the current ones stay.
@available(macOS 15, iOS 18, *)
struct ServeReloader: Service, CustomStringConvertible {
    let server: RTMServer
    /// `rtm serve`'s own arguments, as typed.
    let arguments: [String]
    let reloadsTLS: Bool
    let logger: Logger

    /// How the service group's log lines name it: never with its arguments, which may hold secrets.
    var description: String { "ServeReloader" }

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            if reloadsTLS { try? server.reloadTLSCertificate() }
            do {
                let values = try ServeSettingsReader(arguments: arguments, environment: ProcessInfo.processInfo.environment).read()
                let namespaces = try values.namespaces()
                let defaultCapabilities = try values.defaultCapabilities()
                reloadLogLevel(values.logLevel)
                try await server.reloadAccessRules(namespaces: namespaces, defaultCapabilities: defaultCapabilities)
                logger.notice("SIGHUP: namespaces and default capability", metadata: [
                    "namespaces": "\(values.strings(.namespace))", "default-capability": "\(values.string(.defaultCapability) ?? "none")",
                ])
                let limits = values.connectionLimits()
                try await server.reloadLimits(limits)
                switch (values.string(.webhookUrl), server.webhookStats != nil) {
                case (let url?, true): try server.reloadWebhook(url: url, secret: values.string(.webhookSecret) ?? "")
                case (nil, true): logger.error("SIGHUP: turning webhooks off takes a restart; they keep going to the current URL")
                case (_?, false): logger.error("SIGHUP: turning webhooks on takes a restart")
                case (nil, false): break
                }
                logger.notice("SIGHUP: settings reloaded", metadata: ["publish-rate": "\(limits.publishRatePerSecond)",
                                                                      "error-reply-rate": "\(limits.errorReplyRatePerSecond)"])
            } catch {
                logger.error("SIGHUP: the settings could not be read again; they stay as they were", metadata: ["reason": "\(error)"])
            }
        }
    }

    private func reloadLogLevel(_ level: Logger.Level) {
        let before = ServeLogHandler.level.withLockedValue { $0 }
        guard before != level else { return }
        // Said at the more verbose of the two levels, so that it shows whichever way it goes.
        ServeLogHandler.level.withLockedValue { $0 = min(before, level) }
        logger.notice("SIGHUP: log level \(level) (was \(before))")
        ServeLogHandler.level.withLockedValue { $0 = level }
    }
}
