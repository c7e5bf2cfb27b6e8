/// `rtm serve`'s durability and retention settings: what is kept, for how long, and how safely.
/// Each maps to the `ServerConfiguration` field of the same name.
extension ServeSetting {
    static let store: [ServeSetting] = [
        storeFullSync, userMessageCap, userMessageMaxAgeHours, userMessageResendWindow, publishResendWindow,
        userMessageCommitDelayMs, channelReplayWindow, channelReplayMax, historyRetentionHours,
    ]

    static let storeFullSync = ServeSetting("store-full-sync", .flag, help: """
        fsync every user-message commit: a commit also survives a power loss (default off: it survives kill -9).
        """)
    static let userMessageCap = ServeSetting("user-message-cap", .integer(default: 200, range: 1...1_000_000),
                                             help: "Waiting user messages kept per receiver; beyond it the oldest are dropped and the receiver is told.")
    static let userMessageMaxAgeHours = ServeSetting("user-message-max-age-hours", .number(default: 7 * 24, range: 0.001...87_600),
                                                     help: "How long a waiting user message is kept, in hours.")
    static let userMessageResendWindow = ServeSetting("user-message-resend-window", .number(default: 60, range: 1...86_400), help: """
        How long a resend of a user message (same sender and msgId) is recognised, in seconds (at least the SDK's 10 s request timeout).
        """)
    static let publishResendWindow = ServeSetting("publish-resend-window", .number(default: 60, range: 1...86_400), help: """
        How long a publisher's channel-message ids are remembered after its last session ended, in seconds: a resend from its \
        next session is recognised.
        """)
    static let userMessageCommitDelayMs = ServeSetting("user-message-commit-delay-ms", .number(default: 1, range: 0...1000), help: """
        How long a user message that finds the store idle waits for others to share its commit, in milliseconds (0: at once).
        """)
    static let channelReplayWindow = ServeSetting("channel-replay-window", .number(default: 30, range: 0...86_400),
                                                  help: "How far back a reconnecting client's channels are replayed, in seconds.")
    static let channelReplayMax = ServeSetting("channel-replay-max", .integer(default: 32, range: 0...100_000),
                                               help: "At most this many channel messages replayed per channel.")
    static let historyRetentionHours = ServeSetting("history-retention-hours", .number(default: 7 * 24, range: 0...87_600),
                                                    help: "How long stored history is kept, in hours (0: for ever).")
}
