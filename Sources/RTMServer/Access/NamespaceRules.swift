import NIOConcurrencyHelpers

/// The server's namespaces, which `RTMServer.reloadNamespaces` may replace while it runs
/// (`rtm serve` on SIGHUP). New sessions take the current ones; open sessions are given the new
/// ones by the reload itself (`ConnectionHandler.namespacesChanged`), so no request reads this
/// on the publish path.
final class NamespaceRules: Sendable {
    private let box: NIOLockedValueBox<[ChannelNamespace]>

    init(_ namespaces: [ChannelNamespace]) { box = NIOLockedValueBox(namespaces) }

    /// The namespaces now.
    var current: [ChannelNamespace] { box.withLockedValue { $0 } }

    func replace(_ namespaces: [ChannelNamespace]) { box.withLockedValue { $0 = namespaces } }
}
