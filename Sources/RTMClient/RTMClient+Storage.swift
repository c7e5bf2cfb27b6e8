import NIOCore
import RTMProtocol

/// Storage (AGORA_REFERENCE §2.11): channel and user metadata with compare-and-set revisions,
/// persisted by the server. Channel members that subscribed `withMetadata`, and users who
/// called `subscribeUserMetadata`, get a storage event with the whole set after each change.
///
/// ```swift
/// let current = try await client.getChannelMetadata("room")
/// var change = Metadata(majorRevision: current.majorRevision, items: [MetadataItem(key: "topic", value: "Swift")])
/// try await client.setChannelMetadata("room", change)   // fails with storageOutdatedRevision if someone wrote first
/// ```
extension RTMClient {
    /// Creates or overwrites items of a channel's metadata. With `lock`, only the holder of that
    /// lock may write. Returns the set after the write.
    @discardableResult
    public func setChannelMetadata(_ channel: String, _ metadata: Metadata, options: MetadataOptions = MetadataOptions(),
                                   lock: String? = nil) async throws(RTMError) -> Metadata {
        try check(channel: channel, operation: "setChannelMetadata")
        return try await metadataRequest(.setMetadata, .channel, channel, metadata, options, lock, "setChannelMetadata")
    }

    /// Changes existing items of a channel's metadata (a missing key is an error).
    @discardableResult
    public func updateChannelMetadata(_ channel: String, _ metadata: Metadata, options: MetadataOptions = MetadataOptions(),
                                      lock: String? = nil) async throws(RTMError) -> Metadata {
        try check(channel: channel, operation: "updateChannelMetadata")
        return try await metadataRequest(.updateMetadata, .channel, channel, metadata, options, lock, "updateChannelMetadata")
    }

    /// Removes items of a channel's metadata (no items: all of them).
    @discardableResult
    public func removeChannelMetadata(_ channel: String, _ metadata: Metadata = Metadata(), lock: String? = nil) async throws(RTMError) -> Metadata {
        try check(channel: channel, operation: "removeChannelMetadata")
        return try await metadataRequest(.removeMetadata, .channel, channel, metadata, MetadataOptions(), lock, "removeChannelMetadata")
    }

    /// A channel's metadata (no need to subscribe).
    public func getChannelMetadata(_ channel: String) async throws(RTMError) -> Metadata {
        try check(channel: channel, operation: "getChannelMetadata")
        return try await metadataRequest(.getMetadata, .channel, channel, nil, MetadataOptions(), nil, "getChannelMetadata")
    }

    /// Creates or overwrites items of a user's metadata (this user's when `userId` is nil).
    @discardableResult
    public func setUserMetadata(userId: String? = nil, _ metadata: Metadata, options: MetadataOptions = MetadataOptions()) async throws(RTMError) -> Metadata {
        try await metadataRequest(.setMetadata, .user, userId ?? config.userId, metadata, options, nil, "setUserMetadata")
    }

    /// Changes existing items of a user's metadata.
    @discardableResult
    public func updateUserMetadata(userId: String? = nil, _ metadata: Metadata, options: MetadataOptions = MetadataOptions()) async throws(RTMError) -> Metadata {
        try await metadataRequest(.updateMetadata, .user, userId ?? config.userId, metadata, options, nil, "updateUserMetadata")
    }

    /// Removes items of a user's metadata (no items: all of them).
    @discardableResult
    public func removeUserMetadata(userId: String? = nil, _ metadata: Metadata = Metadata()) async throws(RTMError) -> Metadata {
        try await metadataRequest(.removeMetadata, .user, userId ?? config.userId, metadata, MetadataOptions(), nil, "removeUserMetadata")
    }

    /// A user's metadata (this user's when `userId` is nil).
    public func getUserMetadata(userId: String? = nil) async throws(RTMError) -> Metadata {
        try await metadataRequest(.getMetadata, .user, userId ?? config.userId, nil, MetadataOptions(), nil, "getUserMetadata")
    }

    /// Receives storage events of a user's metadata, starting with a snapshot; kept across
    /// reconnections until `unsubscribeUserMetadata` or logout. Returns the current set.
    @discardableResult
    public func subscribeUserMetadata(userId: String) async throws(RTMError) -> Metadata {
        let core = self.core
        let metadata = try await metadataRequest(.subscribeMetadata, .user, userId, nil, MetadataOptions(), nil, "subscribeUserMetadata")
        await onLoopVoid { core.metadataWatches.insert(userId) }
        return metadata
    }

    /// Stops storage events of a user's metadata.
    public func unsubscribeUserMetadata(userId: String) async throws(RTMError) {
        let core = self.core
        await onLoopVoid { core.metadataWatches.remove(userId) }
        _ = try await metadataRequest(.unsubscribeMetadata, .user, userId, nil, MetadataOptions(), nil, "unsubscribeUserMetadata")
    }

    func metadataRequest(_ type: FrameType, _ storageType: StorageType, _ target: String, _ metadata: Metadata?,
                         _ options: MetadataOptions, _ lock: String?, _ operation: String, notifyAll: Bool = false) async throws(RTMError) -> Metadata {
        let limits = Limits()
        if storageType == .user, let problem = limits.nameProblem(target, kind: "userId") {
            throw RTMError(.invalidUserId, operation: operation, problem)
        }
        for item in metadata?.items ?? [] {
            if let (code, problem) = limits.metadataKeyProblem(item.key) { throw RTMError(code, operation: operation, problem) }
            if item.value.utf8.count > limits.maxMetadataBytes {
                throw RTMError(.storageValueLengthOverflow, operation: operation,
                               "value of '\(item.key)' is \(item.value.utf8.count) bytes; the limit is \(limits.maxMetadataBytes)")
            }
        }
        var frame = Frame(type: type, userId: storageType == .user ? target : nil, channel: storageType == .channel ? target : nil)
        frame.storageType = storageType.rawValue
        frame.metadata = metadata
        frame.recordTs = options.recordTs ? true : nil
        frame.recordUserId = options.recordUserId ? true : nil
        frame.lockName = lock
        frame.notifyAll = notifyAll ? true : nil
        let request = frame
        let core = self.core
        let future = core.loop.flatSubmit { core.request(request, operation: operation) }
        return try await Self.wait(future, operation: operation).metadata ?? Metadata()
    }

    func onLoopVoid(_ body: @escaping @Sendable () -> Void) async {
        try? await eventLoop.submit(body).get()
    }
}
