import RTMProtocol

/// The modern link state (`AgoraRtmLinkState`, SPEC §3).
public enum LinkState: Int, Sendable, CustomStringConvertible {
    /// Not logged in; no connection; caches cleared.
    case idle = 0
    /// Logging in, or a reconnection attempt in progress.
    case connecting = 1
    /// Logged in.
    case connected = 2
    /// Link lost; retrying with backoff (up to 2 min).
    case disconnected = 3
    /// Lost for over 2 min; retrying every 30 s.
    case suspended = 4
    /// Unrecoverable without the application (kicked, token rejected, timeout).
    case failed = 5

    /// The reference's lowerCamel name.
    public var description: String {
        switch self {
        case .idle: "idle"
        case .connecting: "connecting"
        case .connected: "connected"
        case .disconnected: "disconnected"
        case .suspended: "suspended"
        case .failed: "failed"
        }
    }
}

/// What triggered a link-state transition (`AgoraRtmLinkOperation`).
public enum LinkOperation: Int, Sendable, CustomStringConvertible {
    /// The application called `login`.
    case login = 0
    /// The application called `logout`.
    case logout = 1
    /// Joining a stream channel.
    case join = 2
    /// Leaving a stream channel.
    case leave = 3
    /// The server rejected or ended the session.
    case serverReject = 4
    /// The SDK is reconnecting by itself.
    case autoReconnect = 5
    /// The SDK has reconnected.
    case reconnected = 6
    /// Heartbeats were lost (the link went silent).
    case heartbeatTimeout = 7
    /// The server went away or the connection failed.
    case serverTimeout = 8
    /// The network status changed.
    case networkChange = 9

    /// The reference's lowerCamel name.
    public var description: String {
        ["login", "logout", "join", "leave", "serverReject", "autoReconnect", "reconnected",
         "heartbeatTimeout", "serverTimeout", "networkChange"][rawValue]
    }
}

/// Which connection a link event is about (`AgoraRtmServiceType`).
public enum ServiceType: Int, Sendable {
    /// The MESSAGE connection (channels, user messages, presence).
    case message = 1
    /// A STREAM connection (one per joined stream channel).
    case stream = 2
}

/// The classic connection state (`AgoraRtmConnectionState`, SPEC §3, exact values).
public enum ConnectionState: Int, Sendable, CustomStringConvertible {
    /// Initial; not logged in; after login failure, timeout or logout.
    case disconnected = 1
    /// Login in progress.
    case connecting = 2
    /// Logged in.
    case connected = 3
    /// Interrupted for over 4 s; re-logging in by itself.
    case reconnecting = 4
    /// Kicked (e.g. same user id elsewhere); call `logout` before `login`.
    case aborted = 5

    /// The reference's lowerCamel name.
    public var description: String {
        ["", "disconnected", "connecting", "connected", "reconnecting", "aborted"][rawValue]
    }
}

/// Why the classic state changed (`AgoraRtmConnectionChangeReason`, values 1–9).
public enum ConnectionChangeReason: Int, Sendable, CustomStringConvertible {
    /// Logging in.
    case login = 1
    /// Logged in.
    case loginSuccess = 2
    /// Login failed.
    case loginFailure = 3
    /// Login did not complete within the login timeout.
    case loginTimeout = 4
    /// Interrupted for more than 4 s.
    case interrupted = 5
    /// The application logged out.
    case logout = 6
    /// The server banned the login.
    case bannedByServer = 7
    /// Another client logged in with the same user id.
    case remoteLogin = 8
    /// The token expired.
    case tokenExpired = 9

    /// The reference's lowerCamel name.
    public var description: String {
        ["", "login", "loginSuccess", "loginFailure", "loginTimeout", "interrupted", "logout",
         "bannedByServer", "remoteLogin", "tokenExpired"][rawValue]
    }
}
