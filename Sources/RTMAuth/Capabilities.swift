import Foundation

/// What a session may do: for channel names and for other users' ids, name patterns mapped to
/// the operations they allow. Carried by a capability token (`CapabilityToken`), or set by the
/// server as the default of sessions whose login brought none (without a default, such a
/// session may do anything outside the server's private namespaces).
///
/// A pattern is an exact name (`lobby`), a prefix ending in `*` (`room.*` matches `room.a`
/// and `room.`), or `*` alone (every name). A name is allowed an operation when any pattern
/// that matches it lists the operation (or `*`): grants add up, nothing is denied explicitly.
///
/// ```swift
/// let caps = Capabilities(channels: ["room.*": [.subscribe, .publish, .presence]], users: ["*": [.send]])
/// caps.allows(.publish, channel: "room.a")   // true
/// caps.allows(.subscribe, channel: "secret") // false
/// ```
public struct Capabilities: Sendable, Equatable {
    /// An operation on a channel.
    public enum ChannelOperation: String, Sendable, CaseIterable, Comparable {
        /// Subscribe to a message channel (and receive its messages and presence events).
        case subscribe
        /// Publish to a message channel.
        case publish
        /// Read who is in the channel and their states (`whoNow`, `getState`,
        /// `getChannelMemberCount`) and set one's own state in it.
        case presence
        /// Read the channel's metadata, or receive its storage events (`withMetadata`).
        case metadataRead = "metadata.read"
        /// Write the channel's metadata.
        case metadataWrite = "metadata.write"
        /// Define, take, release, revoke, remove or list the channel's locks (`withLock`).
        case lock
        /// Read the channel's stored messages (`getMessages`).
        case history
        /// Join the stream channel (and subscribe to its topics).
        case streamJoin = "stream.join"
        /// Join a topic of the stream channel as a publisher and publish to it.
        case streamPublish = "stream.publish"

        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// An operation on another user (a session may always act on itself).
    public enum UserOperation: String, Sendable, CaseIterable, Comparable {
        /// Send the user messages (`sendUser`).
        case send
        /// Query or watch the user's online status, and see which channels it is in
        /// (`queryPeersOnlineStatus`, `subscribePeersOnlineStatus`, `whereNow`).
        case status
        /// Send the user call invitations (`invite`).
        case invite
        /// Read the user's metadata or receive its storage events.
        case metadataRead = "metadata.read"
        /// Write the user's metadata.
        case metadataWrite = "metadata.write"

        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// A name pattern and what it grants.
    public struct Grant<Operation: Hashable & Sendable>: Sendable, Equatable {
        /// The pattern as written (`room.*`, `lobby`, `*`).
        public let pattern: String
        /// The operations it allows.
        public let operations: Set<Operation>
    }

    /// Channel patterns and what each allows (sorted by pattern).
    public private(set) var channels: [Grant<ChannelOperation>]
    /// User-id patterns and what each allows on those users (sorted by pattern).
    public private(set) var users: [Grant<UserOperation>]

    /// Grants `channels` and `users` (patterns mapped to their operations).
    public init(channels: [String: Set<ChannelOperation>] = [:], users: [String: Set<UserOperation>] = [:]) {
        self.channels = channels.sorted { $0.key < $1.key }.map { Grant(pattern: $0.key, operations: $0.value) }
        self.users = users.sorted { $0.key < $1.key }.map { Grant(pattern: $0.key, operations: $0.value) }
    }

    /// Whether `operation` on channel `name` is granted.
    public func allows(_ operation: ChannelOperation, channel name: String) -> Bool {
        channels.contains { $0.operations.contains(operation) && Self.matches($0.pattern, name) }
    }

    /// Whether `operation` on user `userId` is granted.
    public func allows(_ operation: UserOperation, user userId: String) -> Bool {
        users.contains { $0.operations.contains(operation) && Self.matches($0.pattern, userId) }
    }

    /// Whether `pattern` (exact, `prefix*`, or `*`) matches `name`.
    public static func matches(_ pattern: String, _ name: String) -> Bool {
        guard pattern.last == "*" else { return pattern == name }
        return name.hasPrefix(pattern.dropLast())
    }

    /// The problem with a pattern, or nil: a pattern is 1 to 65 characters, with at most one
    /// `*`, at its end.
    public static func patternProblem(_ pattern: String) -> String? {
        if pattern.isEmpty { return "a pattern is empty" }
        if pattern.count > 65 { return "pattern '\(pattern.prefix(20))…' is longer than 65 characters" }
        if pattern.dropLast().contains("*") { return "pattern '\(pattern)' has a '*' before its end (only a trailing '*' is a wildcard)" }
        return nil
    }
}

extension Capabilities {
    /// Parses the command-line form `PATTERN=OP,OP` (`room.*=subscribe,publish`; `*` alone
    /// for every operation) into a grant map entry. Throws a `TokenError` naming the problem.
    public static func parseGrant<Operation: RawRepresentable & CaseIterable & Hashable>(
        _ text: String, as: Operation.Type
    ) throws(TokenError) -> (pattern: String, operations: Set<Operation>) where Operation.RawValue == String {
        guard let equals = text.firstIndex(of: "=") else {
            throw TokenError(.malformed, "grant '\(text)' is not PATTERN=OPERATION,OPERATION")
        }
        let pattern = String(text[..<equals])
        if let problem = patternProblem(pattern) { throw TokenError(.malformed, problem) }
        let names = text[text.index(after: equals)...].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return (pattern, try operations(names, in: pattern))
    }

    /// Operations from their names (`*`: all of them). Throws naming an unknown one.
    static func operations<Operation: RawRepresentable & CaseIterable & Hashable>(
        _ names: [String], in pattern: String
    ) throws(TokenError) -> Set<Operation> where Operation.RawValue == String {
        var result: Set<Operation> = []
        for name in names {
            if name == "*" { return Set(Operation.allCases) }
            guard let operation = Operation(rawValue: name) else {
                let known = Operation.allCases.map(\.rawValue).sorted().joined(separator: ", ")
                throw TokenError(.malformed, "unknown operation '\(name)' for '\(pattern)' (known: \(known), or *)")
            }
            result.insert(operation)
        }
        if result.isEmpty { throw TokenError(.malformed, "'\(pattern)' grants no operation") }
        return result
    }
}
