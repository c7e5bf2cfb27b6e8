import NIOConcurrencyHelpers
import RTMAuth

/// The server's rules every session is bound by, which `RTMServer.reloadAccessRules` may replace
/// while it runs (`rtm serve` on SIGHUP): the namespaces, and the default capability of a
/// session without a capability token. New sessions take the current ones; open sessions are
/// given the new ones by the reload itself (`ConnectionHandler.accessRulesChanged`), so no
/// request reads this on the publish path.
final class AccessRules: Sendable {
    /// The rules at one time.
    struct Rules: Sendable {
        /// `ServerConfiguration.namespaces`.
        var namespaces: [ChannelNamespace]
        /// `ServerConfiguration.defaultCapabilities`.
        var defaultCapabilities: Capabilities?
    }

    private let box: NIOLockedValueBox<Rules>

    init(namespaces: [ChannelNamespace], defaultCapabilities: Capabilities?) {
        box = NIOLockedValueBox(Rules(namespaces: namespaces, defaultCapabilities: defaultCapabilities))
    }

    /// The rules now.
    var current: Rules { box.withLockedValue { $0 } }

    /// Replaces the rules.
    func replace(_ rules: Rules) { box.withLockedValue { $0 = rules } }
}
