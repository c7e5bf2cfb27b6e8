import Logging
import NIOConcurrencyHelpers

/// `rtm serve`'s log lines, to standard error, at a level that can change while it runs (a
/// `SIGHUP` re-reads `log-level` from the configuration file): every logger the server made
/// shares the one level.
struct ServeLogHandler: LogHandler {
    /// The level of every `ServeLogHandler`.
    static let level = NIOLockedValueBox(Logger.Level.info)

    private var stream: StreamLogHandler

    init(label: String) { stream = StreamLogHandler.standardError(label: label) }

    var logLevel: Logger.Level {
        get { Self.level.withLockedValue { $0 } }
        set { Self.level.withLockedValue { $0 = newValue } }
    }

    var metadata: Logger.Metadata {
        get { stream.metadata }
        set { stream.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { stream[metadataKey: key] }
        set { stream[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        stream.log(event: event)
    }
}
