import Foundation
import NIOCore
import RTMAuth

/// A server rule for the channels whose names match a pattern (`room.*`, `news.*`, `admins`):
/// what every session may do there, whatever its capability token grants. The first namespace
/// whose pattern matches a channel is its namespace; a channel in none has every default.
///
/// ```swift
/// config.namespaces = [
///     try ChannelNamespace(parsing: "private.*:private"),
///     try ChannelNamespace(parsing: "news.*:no-client-publish,no-presence"),
///     try ChannelNamespace(parsing: "room.*:max-members=50,no-history"),
/// ]
/// ```
public struct ChannelNamespace: Sendable, Equatable {
    /// The channel-name pattern (`Capabilities.matches`: exact, `prefix*`, `*`).
    public var pattern: String
    /// Only a session whose capability token grants an operation may do it here (a session
    /// without one is refused everything in the namespace).
    public var isPrivate = false
    /// Clients may publish (false: only the backend, through the admin API).
    public var clientPublish = true
    /// Members are announced and listed (false: no presence events, `whoNow`, states or member
    /// counts; subscribers join quietly).
    public var presence = true
    /// Messages may be stored (`storeInHistory`) and read back (`getMessages`).
    public var history = true
    /// At most this many members at once (nil: no limit); a subscribe past it is refused.
    public var maxMembers: Int?
    /// How far back a returning subscriber's missed messages are replayed here (nil: the
    /// server's `channelReplayWindow`).
    public var replayWindow: TimeAmount?
    /// At most this many messages replayed per channel here (nil: the server's
    /// `channelReplayMax`; 0: none kept).
    public var replayMax: Int?
    /// The events the authorization hook is asked about here (`subscribe`, `publish`; needs
    /// `ServerConfiguration.authorizationHook`).
    public var hooks: Set<HookEvent> = []
    /// What a hooked request gets when the backend cannot decide.
    public var hookFailure: HookFailureMode = .closed

    /// A namespace with every default for `pattern`.
    public init(pattern: String) {
        self.pattern = pattern
    }

    /// Parses the command-line form `PATTERN:OPTION,OPTION` (split at the last `:`): options
    /// `private`, `no-client-publish`, `no-presence`, `no-history`, `max-members=N`,
    /// `hook-subscribe`, `hook-publish`, `hook-fail-open`, `replay-window=SECONDS`,
    /// `replay-max=N`. Throws a
    /// `NamespaceError` naming the problem.
    public init(parsing text: String) throws(NamespaceError) {
        guard let colon = text.lastIndex(of: ":") else {
            throw NamespaceError("namespace '\(text)' is not PATTERN:OPTION,OPTION (options: \(Self.optionNames))")
        }
        let pattern = String(text[..<colon])
        if let problem = Capabilities.patternProblem(pattern) { throw NamespaceError("namespace '\(text)': \(problem)") }
        self.init(pattern: pattern)
        let options = text[text.index(after: colon)...].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !options.isEmpty else { throw NamespaceError("namespace '\(pattern)' has no option (options: \(Self.optionNames))") }
        for option in options {
            switch option {
            case "private": isPrivate = true
            case "no-client-publish": clientPublish = false
            case "no-presence": presence = false
            case "no-history": history = false
            case "hook-subscribe": hooks.insert(.subscribe)
            case "hook-publish": hooks.insert(.publish)
            case "hook-fail-open": hookFailure = .open
            default:
                let (name, value) = option.firstIndex(of: "=").map { (option[..<$0], option[option.index(after: $0)...]) } ?? (option[...], "")
                switch name {
                case "max-members":
                    guard let count = Int(value), count > 0 else { throw NamespaceError("namespace '\(pattern)': max-members must be a whole number ≥ 1, got '\(value)'") }
                    maxMembers = count
                case "replay-window":
                    guard let seconds = Double(value), seconds >= 0, seconds <= 86_400 else {
                        throw NamespaceError("namespace '\(pattern)': replay-window must be seconds in 0...86400, got '\(value)'")
                    }
                    replayWindow = .nanoseconds(Int64(seconds * 1e9))
                case "replay-max":
                    guard let count = Int(value), count >= 0, count <= 100_000 else {
                        throw NamespaceError("namespace '\(pattern)': replay-max must be a whole number in 0...100000, got '\(value)'")
                    }
                    replayMax = count
                default:
                    throw NamespaceError("namespace '\(pattern)': unknown option '\(option)' (options: \(Self.optionNames))")
                }
            }
        }
    }

    static let optionNames = "private, no-client-publish, no-presence, no-history, max-members=N, hook-subscribe, hook-publish, hook-fail-open, replay-window=SECONDS, replay-max=N"
}

/// A namespace option that could not be read.
public struct NamespaceError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let description: String
    init(_ description: String) { self.description = description }
}

extension [ChannelNamespace] {
    /// The namespace of `channel`: the first whose pattern matches it.
    func namespace(of channel: String) -> ChannelNamespace? {
        first { Capabilities.matches($0.pattern, channel) }
    }

    /// The failure mode of `event` on `channel` when its namespace asks the hook about it;
    /// nil: not asked.
    func hook(_ event: HookEvent, on channel: String) -> HookFailureMode? {
        guard let namespace = namespace(of: channel), namespace.hooks.contains(event) else { return nil }
        return namespace.hookFailure
    }
}
