import GRDB

/// The embedded store of call invitations: `invitations.sqlite` in the data directory (WAL;
/// a commit survives `kill -9`, see `SQLiteFile`). One row per invitation, replaced at every
/// change (only by a higher revision), deleted when its forget window is over.
final class SQLiteInvitationStore: InvitationStore {
    private let db: DatabaseQueue

    /// Opens (creating if needed) the database at `path`; nil = in memory.
    init(path: String?, fullSync: Bool) throws {
        db = try SQLiteFile.open(path: path, fullSync: fullSync, migrations: [
            "v1-invitations": """
                CREATE TABLE invitation (
                    app TEXT NOT NULL, id TEXT NOT NULL, caller TEXT NOT NULL, callee TEXT NOT NULL,
                    content TEXT NOT NULL, channel TEXT, sent_at INTEGER NOT NULL, stage TEXT NOT NULL,
                    failure INTEGER, response TEXT, ended_at INTEGER, caller_window INTEGER NOT NULL,
                    revision INTEGER NOT NULL,
                    PRIMARY KEY (app, id));
                """,
        ])
    }

    /// Every row; one whose stage this version does not know is skipped (a newer server wrote it).
    func loadAll() throws -> [StoredInvitation] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM invitation ORDER BY app, id").compactMap { row in
                guard let stage = StoredInvitation.Stage(rawValue: row["stage"]) else { return nil }
                let revision: Int64 = row["revision"]
                return StoredInvitation(
                    appId: row["app"], id: row["id"], caller: row["caller"], callee: row["callee"], content: row["content"],
                    channel: row["channel"], sentAtMillis: row["sent_at"], stage: stage, failure: row["failure"],
                    response: row["response"], endedAtMillis: row["ended_at"], callerWindowMillis: row["caller_window"],
                    revision: UInt64(max(0, revision)))
            }
        }
    }

    func save(_ i: StoredInvitation) throws {
        try db.write { db in
            try db.execute(sql: """
                INSERT INTO invitation(app, id, caller, callee, content, channel, sent_at, stage, failure, response,
                                       ended_at, caller_window, revision)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(app, id) DO UPDATE SET
                    caller = excluded.caller, callee = excluded.callee, content = excluded.content,
                    channel = excluded.channel, sent_at = excluded.sent_at, stage = excluded.stage,
                    failure = excluded.failure, response = excluded.response, ended_at = excluded.ended_at,
                    caller_window = excluded.caller_window, revision = excluded.revision
                WHERE excluded.revision >= invitation.revision
                """, arguments: [i.appId, i.id, i.caller, i.callee, i.content, i.channel, i.sentAtMillis, i.stage.rawValue,
                                 i.failure, i.response, i.endedAtMillis, i.callerWindowMillis, Int64(clamping: i.revision)])
        }
    }

    func delete(appId: String, id: String, throughRevision revision: UInt64) throws {
        try db.write { db in
            try db.execute(sql: "DELETE FROM invitation WHERE app = ? AND id = ? AND revision <= ?",
                           arguments: [appId, id, Int64(clamping: revision)])
        }
    }
}
