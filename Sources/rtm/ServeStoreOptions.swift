import ArgumentParser
import NIOCore
import RTMServer

/// `rtm serve`'s durability and retention settings (docs/configuration.md): what is kept, for how
/// long, and how safely. Each maps to the `ServerConfiguration` field of the same name and has
/// its default.
struct ServeStoreOptions: ParsableArguments {
    @Flag(help: "fsync every user-message commit: a commit also survives a power loss (default off: it survives kill -9).")
    var storeFullSync = false
    @Option(help: "Waiting user messages kept per receiver; beyond it the oldest are dropped and the receiver is told.")
    var userMessageCap = 200
    @Option(help: "How long a waiting user message is kept, in hours.")
    var userMessageMaxAgeHours: Double = 7 * 24
    @Option(help: "How long a resend of a user message (same sender and msgId) is recognised, in seconds (at least the SDK's 10 s request timeout).")
    var userMessageResendWindow: Double = 60
    @Option(help: "How long a publisher's channel-message ids are remembered after its last session ended, in seconds: a resend from its next session is recognised (at least 1).")
    var publishResendWindow: Double = 60
    @Option(help: "How long a user message that finds the store idle waits for others to share its commit, in milliseconds (0: at once).")
    var userMessageCommitDelayMs: Double = 1
    @Option(help: "How far back a reconnecting client's channels are replayed, in seconds.")
    var channelReplayWindow: Double = 30
    @Option(help: "At most this many channel messages replayed per channel.")
    var channelReplayMax = 32
    @Option(help: "How long stored history is kept, in hours (0: for ever).")
    var historyRetentionHours: Double = 7 * 24

    /// Checks the values and sets them on `config`.
    func apply(to config: inout ServerConfiguration) throws {
        guard userMessageCap > 0 else { throw ValidationError("--user-message-cap must be > 0, got \(userMessageCap)") }
        guard userMessageMaxAgeHours > 0 else { throw ValidationError("--user-message-max-age-hours must be > 0, got \(userMessageMaxAgeHours)") }
        guard userMessageResendWindow >= 1 else {
            throw ValidationError("--user-message-resend-window must be at least 1 s, got \(userMessageResendWindow)")
        }
        guard publishResendWindow >= 1 else {
            throw ValidationError("--publish-resend-window must be at least 1 s, got \(publishResendWindow)")
        }
        guard userMessageCommitDelayMs >= 0, userMessageCommitDelayMs <= 1000 else {
            throw ValidationError("--user-message-commit-delay-ms must be in 0...1000, got \(userMessageCommitDelayMs)")
        }
        guard channelReplayWindow >= 0, channelReplayMax >= 0 else {
            throw ValidationError("--channel-replay-window and --channel-replay-max must be ≥ 0")
        }
        guard historyRetentionHours >= 0 else { throw ValidationError("--history-retention-hours must be ≥ 0, got \(historyRetentionHours)") }
        config.storeFullSync = storeFullSync
        config.userMessageCap = userMessageCap
        config.userMessageMaxAge = Self.seconds(userMessageMaxAgeHours * 3600)
        config.userMessageResendWindow = Self.seconds(userMessageResendWindow)
        config.publishResendWindow = Self.seconds(publishResendWindow)
        config.userMessageCommitDelay = Self.seconds(userMessageCommitDelayMs / 1000)
        config.channelReplayWindow = Self.seconds(channelReplayWindow)
        config.channelReplayMax = channelReplayMax
        config.historyRetention = historyRetentionHours == 0 ? nil : Self.seconds(historyRetentionHours * 3600)
    }

    private static func seconds(_ value: Double) -> TimeAmount {
        .nanoseconds(Int64(value * 1e9))
    }
}
