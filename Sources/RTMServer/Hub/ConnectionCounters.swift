/// Open connections by kind, and the peak of MESSAGE sessions (the PCU metric, SPEC K-2):
/// STREAM connections are counted apart and never toward PCU (K-3).
public struct ConnectionCounters: Sendable, Equatable {
    /// Logged-in MESSAGE connections now.
    public var message = 0
    /// Joined STREAM connections now.
    public var stream = 0
    /// The highest `message` seen since the server started (peak concurrent users).
    public var peakMessage = 0

    /// Zero counts.
    public init() {}

    /// The kinds of connection counted.
    enum Kind { case message, stream }

    mutating func count(_ kind: Kind, opened: Bool) {
        switch kind {
        case .message:
            message += opened ? 1 : -1
            peakMessage = max(peakMessage, message)
        case .stream:
            stream += opened ? 1 : -1
        }
    }
}
