import NIOCore

/// This node's sessions (SPEC P-1), by user and by the connection serving them. A sub-value of
/// `HubState`: its fields change only through its own functions, which keep the two indexes
/// in step (a session's connection is found from the connection, and no connection names a
/// session that is gone).
struct SessionTable {
    /// The sessions, by user.
    private(set) var byUser: [UserKey: HubState.Session] = [:]
    /// The user each logged-in connection serves.
    private var byConnection: [UInt64: UserKey] = [:]
    /// Random start: session ids are unique across the nodes of a cluster too.
    private var nextID = UInt64.random(in: 1...(1 << 52))

    /// `key`'s session, if it has one here.
    subscript(key: UserKey) -> HubState.Session? { byUser[key] }

    /// How many sessions there are (online or within their grace window).
    var count: Int { byUser.count }

    /// The users with a session here.
    var keys: Dictionary<UserKey, HubState.Session>.Keys { byUser.keys }

    /// The user `connection` serves, if it is logged in.
    func key(of connection: ConnectionRef) -> UserKey? { byConnection[connection.id] }

    /// The user the connection with this id serves, if it is logged in.
    func key(ofConnection id: UInt64) -> UserKey? { byConnection[id] }

    /// A new session of `key` on `connection`, with a fresh id and resume token.
    mutating func start(_ key: UserKey, on connection: ConnectionRef, heartbeat: TimeAmount, presenceTimeout: TimeAmount,
                        grantsIssuedAt: UInt32?) -> HubState.Session {
        let id = nextID
        nextID += 1
        let token = String(UInt64.random(in: 1...UInt64.max), radix: 36) + "." + String(id, radix: 36)
        let session = HubState.Session(id: id, key: key, resumeToken: token, connection: connection,
                                       heartbeat: heartbeat, presenceTimeout: presenceTimeout, grantsIssuedAt: grantsIssuedAt)
        put(session)
        return session
    }

    /// Puts `session` as it is (one that moved here from another node), replacing the user's.
    mutating func put(_ session: HubState.Session) {
        if let old = byUser[session.key]?.connection { byConnection[old.id] = nil }
        byUser[session.key] = session
        if let connection = session.connection { byConnection[connection.id] = session.key }
    }

    /// `key`'s session resumed on `connection` (P-1): its new liveness and grants; returns it
    /// and the connection it had (closed by the caller), nil without a session.
    mutating func resume(_ key: UserKey, on connection: ConnectionRef, heartbeat: TimeAmount, presenceTimeout: TimeAmount,
                         grantsIssuedAt: UInt32?) -> (session: HubState.Session, replaced: ConnectionRef?)? {
        guard var session = byUser[key] else { return nil }
        let replaced = session.connection
        session.grantsIssuedAt = grantsIssuedAt
        session.connection = connection
        session.generation &+= 1
        session.heartbeat = heartbeat
        session.presenceTimeout = presenceTimeout
        put(session)   // the replaced connection's index goes, the new one's comes
        return (session, replaced)
    }

    /// The connection of a session closed without a logout: the session stays, with no
    /// connection and a new generation (its grace window's). Nil when `connection` served none.
    mutating func disconnect(_ connection: ConnectionRef) -> HubState.Session? {
        guard let key = byConnection.removeValue(forKey: connection.id),
              var session = byUser[key], session.connection == connection else { return nil }
        session.connection = nil
        session.generation &+= 1
        byUser[key] = session
        return session
    }

    /// Ends `key`'s session here (it ended, or moved to another node); returns it.
    mutating func remove(_ key: UserKey) -> HubState.Session? {
        guard let session = byUser.removeValue(forKey: key) else { return nil }
        if let connection = session.connection { byConnection[connection.id] = nil }
        return session
    }

    /// `key`'s session is a member of `channel` from now on.
    mutating func join(_ key: UserKey, channel: String) {
        byUser[key]?.channels.insert(channel)
    }

    /// `key`'s session leaves `channel`; false when it was not a member.
    mutating func leave(_ key: UserKey, channel: String) -> Bool {
        byUser[key]?.channels.remove(channel) != nil
    }

    /// `key`'s session has new grants, from a capability token issued then (nil: from none).
    mutating func grantsChanged(_ key: UserKey, issuedAt: UInt32?) {
        byUser[key]?.grantsIssuedAt = issuedAt
    }
}
