import GRDB
import MiniFlake

extension SQLiteNoteStore: InviteStore {
    static let inviteColumns = "id, code_hash, note, uses_total, uses_left, expires_at, created_at, revoked_at"

    static func invite(from row: Row) -> InviteRecord {
        InviteRecord(
            id: row[0], codeHash: row[1], note: row[2], usesTotal: row[3], usesLeft: row[4], expiresAt: row[5], createdAt: row[6],
            revokedAt: row[7])
    }

    public func createInvite(codeHash: String, note: String?, uses: Int, expiresAt: Int64?, createdAt: Int64) async throws -> InviteRecord {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO invites (code_hash, note, uses_total, uses_left, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [codeHash, note, uses, uses, expiresAt, createdAt])
            return InviteRecord(
                id: db.lastInsertedRowID, codeHash: codeHash, note: note, usesTotal: uses, usesLeft: uses, expiresAt: expiresAt,
                createdAt: createdAt, revokedAt: nil)
        }
    }

    public func invites() async throws -> [InviteRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.inviteColumns) FROM invites ORDER BY id").map(Self.invite(from:))
        }
    }

    public func invite(byCodeHash codeHash: String) async throws -> InviteRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.inviteColumns) FROM invites WHERE code_hash = ?", arguments: [codeHash])
                .map(Self.invite(from:))
        }
    }

    public func revokeInvite(id: Int64, revokedAt: Int64) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE invites SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?", arguments: [revokedAt, id])
            return db.changesCount == 1
        }
    }

    public func createAccount(_ account: AccountRecord, consumingInvite codeHash: String, now: Int64) async throws {
        // One write transaction: SQLite has one writer, so the use taken here cannot be taken by another sign-up, and
        // a failed insert rolls it back.
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE invites SET uses_left = uses_left - 1
                    WHERE code_hash = ? AND uses_left > 0 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
                    """,
                arguments: [codeHash, now])
            guard db.changesCount == 1 else { throw NoteStoreError.inviteNotUsable }
            try Self.insertAccount(account, db)
        }
    }
}
