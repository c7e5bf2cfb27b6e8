import Logging
import NIOCore
import RTMServer

/// The server's configuration from `rtm serve`'s settings: the listener, the limits, drain,
/// TLS and webhooks here; durability, the authorization hook, the admin API and the cluster in
/// their own files. The apps come from `Serve` (they may need the data directory).
extension ServeSettingValues {
    /// Everything but the apps and the cluster, checked.
    func serverConfiguration() throws(ServeSettingError) -> ServerConfiguration {
        var config = ServerConfiguration()
        config.host = text(.host)
        config.port = whole(.port)
        config.dataDirectory = text(.dataDir)
        guard !text(.dataDir).isEmpty else { throw invalid(.dataDir) }
        config.namespaces = try namespaces()
        config.defaultCapabilities = try defaultCapabilities()
        config.heartbeatSlack = Self.seconds(number(.heartbeatSlack))
        config.loginRatePerSecond = number(.loginRate)
        config.loginDeadline = Self.seconds(number(.loginDeadline))
        config.memoryTrimInterval = Self.seconds(number(.memoryTrimInterval))
        let limits = connectionLimits()
        config.publishRatePerSecond = limits.publishRatePerSecond
        config.errorReplyRatePerSecond = limits.errorReplyRatePerSecond
        config.errorReplyBurst = limits.errorReplyBurst
        if let maxConnections = int(.maxConnections) { config.maxConnections = maxConnections }
        if let threads = int(.threads) { config.threads = threads }
        config.drainRate = number(.drainRate)
        config.drainTimeout = Self.seconds(number(.drainTimeout))
        config.drainReconnectSpread = Self.seconds(number(.drainReconnectSpread))
        guard isGiven(.tlsCert) == isGiven(.tlsKey) else { throw .together([.tlsCert, .tlsKey], "go together") }
        config.tlsCertificatePath = string(.tlsCert)
        config.tlsKeyPath = string(.tlsKey)
        config.webhook = try webhook()
        config.testDropSeq = int(.testDropSeq).map(UInt64.init)
        if let minimum = int(.testLockTtlMin) { config.lockTTLRange = minimum...max(minimum, config.lockTTLRange.upperBound) }
        if let expiry = double(.testInvitationExpiry) { config.invitationExpiry = Self.seconds(expiry) }
        if let probe = double(.testClusterProbeTimeout) { config.clusterPeerProbeTimeout = Self.seconds(probe) }
        try applyStore(to: &config)
        try applyAuthHook(to: &config)
        try applyAdmin(to: &config)
        return config
    }

    /// The channel namespaces, parsed (`SIGHUP` reloads them).
    func namespaces() throws(ServeSettingError) -> [ChannelNamespace] {
        try strings(.namespace).map { text throws(ServeSettingError) in
            do throws(NamespaceError) { return try ChannelNamespace(parsing: text) } catch {
                throw invalid(.namespace, got: text, allowed: "PATTERN:OPTION,… (\(error))")
            }
        }
    }

    /// The per-connection rates (`SIGHUP` reloads them).
    func connectionLimits() -> ConnectionLimits {
        ConnectionLimits(publishRatePerSecond: number(.publishRate), errorReplyRatePerSecond: number(.errorReplyRate),
                         errorReplyBurst: number(.errorReplyBurst))
    }

    /// The log level (`SIGHUP` reloads it); the declaration's choices are swift-log's levels.
    var logLevel: Logger.Level {
        guard let level = Logger.Level(rawValue: text(.logLevel)) else { preconditionFailure("log-level's choices are swift-log's levels") }
        return level
    }

    /// webhook-url with webhook-secret, and its queue.
    private func webhook() throws(ServeSettingError) -> WebhookConfiguration? {
        guard let url = string(.webhookUrl) else {
            if isGiven(.webhookSecret) { throw .together([.webhookUrl, .webhookSecret], "go together (the secret without a URL signs nothing)") }
            return nil
        }
        guard let secret = string(.webhookSecret), !secret.isEmpty else {
            throw .together([.webhookUrl, .webhookSecret], "go together (a webhook needs a non-empty secret)")
        }
        var webhook = WebhookConfiguration(url: url, secret: secret)
        webhook.maxQueuedEvents = whole(.webhookMaxQueued)
        return webhook
    }

    static func seconds(_ value: Double) -> TimeAmount {
        .nanoseconds(Int64(value * 1e9))
    }
}
