import NIOCore

/// The PostgreSQL backplane's sizes and timers (`PostgresChannelBackplane`); tests shrink the
/// timers to milliseconds.
public struct PostgresBackplaneOptions: Sendable {
    /// The pool's connections (appends, reads, NOTIFY, leases, trims); default 4.
    public var poolSize = 4
    /// The follower's read interval while notifications cannot be counted on (its listening
    /// connection down, a number missing, a read failed); default 100 ms.
    public var pollInterval: TimeAmount = .milliseconds(100)
    /// The follower's read interval while its listening connection is up and nothing is
    /// missing (the reads then only find messages whose notification never came: the database
    /// restarted between their commit and its notifications, or a node of an earlier release,
    /// which notifies after its commit, died in between); default 1 s. Never below
    /// `pollInterval`.
    public var quietPollInterval: TimeAmount = .seconds(1)
    /// How long a missing number is waited for before it is a gap (M-2); default 5 s.
    public var holdback: TimeAmount = .seconds(5)
    /// The wait between attempts to reach the database again; default 1 s.
    public var retryInterval: TimeAmount = .seconds(1)
    /// The longest one call to the database (an append, a log read, a NOTIFY) waits before it
    /// fails and is tried again; default 5 s. A call written to a pooled connection that had
    /// just closed would otherwise wait for ever (`BoundedCall`).
    public var callTimeout: TimeAmount = .seconds(5)
    /// How often this node renews its lease and checks the others'; default 2 s.
    public var leaseInterval: TimeAmount = .seconds(2)
    /// How long a lease lasts after its renewal; default 10 s. A node that stops renewing
    /// (killed, cut off) is declared dead by the others within `lease + leaseInterval`.
    public var lease: TimeAmount = .seconds(10)
    /// How long channel messages stay in the log (replay and history from any node need far
    /// less: 30 s / 32 messages); default 24 h.
    public var retention: TimeAmount = .hours(24)
    /// How often the log is trimmed of messages older than `retention` (by one node per
    /// period); default 10 minutes.
    public var trimInterval: TimeAmount = .minutes(10)

    /// How far back a starting node reads the publishers' message ids from the log, so that a
    /// resend through it of a message committed before it started is recognised (M-3); match
    /// the server's `publishResendWindow` (`rtm serve` does). Default 60 s.
    public var resendWindow: TimeAmount = .seconds(60)
    /// The most ids read back per publisher (the server's `dedupCapacity`). Default 1,024.
    public var resendMemory = 1024

    public init() {}
}
