import MiniFlake
import PostgresNIO

extension PostgresNoteStore: InviteStore {
    private typealias InviteRow = (Int64, String, String?, Int64, Int64, Int64?, Int64, Int64?)

    private static func invite(_ row: InviteRow) -> InviteRecord {
        InviteRecord(
            id: row.0, codeHash: row.1, note: row.2, usesTotal: Int(row.3), usesLeft: Int(row.4), expiresAt: row.5, createdAt: row.6,
            revokedAt: row.7)
    }

    public func createInvite(codeHash: String, note: String?, uses: Int, expiresAt: Int64?, createdAt: Int64) async throws -> InviteRecord {
        try await run { client in
            let rows = try await client.query(
                """
                INSERT INTO invites (code_hash, note, uses_total, uses_left, expires_at, created_at)
                VALUES (\(codeHash), \(note), \(Int64(uses)), \(Int64(uses)), \(expiresAt), \(createdAt))
                RETURNING id
                """,
                logger: self.logger)
            var id: Int64?
            for try await value in rows.decode(Int64.self) { id = value }
            guard let id else { throw NoteStoreError.unavailable("the invite's insert returned no ID") }
            return InviteRecord(
                id: id, codeHash: codeHash, note: note, usesTotal: uses, usesLeft: uses, expiresAt: expiresAt, createdAt: createdAt,
                revokedAt: nil)
        }
    }

    public func invites() async throws -> [InviteRecord] {
        try await fetchInvites(
            "SELECT id, code_hash, note, uses_total, uses_left, expires_at, created_at, revoked_at FROM invites ORDER BY id")
    }

    public func invite(byCodeHash codeHash: String) async throws -> InviteRecord? {
        try await fetchInvites(
            """
            SELECT id, code_hash, note, uses_total, uses_left, expires_at, created_at, revoked_at FROM invites
            WHERE code_hash = \(codeHash)
            """
        ).first
    }

    private func fetchInvites(_ query: PostgresQuery) async throws -> [InviteRecord] {
        try await run { client in
            var invites: [InviteRecord] = []
            for try await row in try await client.query(query, logger: self.logger).decode(InviteRow.self) {
                invites.append(Self.invite(row))
            }
            return invites
        }
    }

    public func revokeInvite(id: Int64, revokedAt: Int64) async throws -> Bool {
        try await run { client in
            var found = false
            for try await _ in try await client.query(
                "UPDATE invites SET revoked_at = COALESCE(revoked_at, \(revokedAt)) WHERE id = \(id) RETURNING 1", logger: self.logger)
            {
                found = true
            }
            return found
        }
    }

    public func createAccount(_ account: AccountRecord, consumingInvite codeHash: String, now: Int64) async throws {
        let logger = self.logger
        try await transaction { connection in
            // READ COMMITTED: a second sign-up updating the same row waits for the first to commit, then re-checks
            // `uses_left > 0` against the committed row, so it cannot take a use that is gone.
            var consumed = false
            for try await _ in try await connection.query(
                """
                UPDATE invites SET uses_left = uses_left - 1
                WHERE code_hash = \(codeHash) AND uses_left > 0 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > \(now))
                RETURNING 1
                """,
                logger: logger)
            {
                consumed = true
            }
            guard consumed else { throw NoteStoreError.inviteNotUsable }
            try await Self.insertAccount(account, on: connection, logger: logger)
        }
    }
}
